"""A 400 of the chat request a Responses request becomes, renamed to what the Responses request sent: its
`input[i]`, `instructions`, `text.format`, flat `tools[j]` and `max_output_tokens`, where the chat's checks
name `messages[k]`, `response_format`, `tools[i].function` and `max_completion_tokens`."""

from __future__ import annotations

import re
from typing import Any

from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest
from modelport.protocol.response_request import ResponseRequest
from modelport.service.responses import items

# The chat's parameters a Responses request sends under other names.
_RENAMED = {
    "messages": "input",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
    "response_format": "text.format",
}
# How the chat's checks write a part of `response_format`, and the Responses request's name of that part.
_FORMAT_PARTS = (
    ("response_format.json_schema.schema", "text.format.schema"),
    ("response_format", "text.format"),
)
_CHAT_TOOL = re.compile(r"tools\[(\d+)\]\.function")


def rename(
    error: InvalidRequestError,
    chat: ChatCompletionRequest,
    turn: list[dict[str, Any]],
    request: ResponseRequest,
) -> None:
    """Rename what `error` names as `request` sent it: the messages' count as `input`, a bound on tokens as
    `max_output_tokens`, `messages[k]…` as the turn's `input[i]…` it came from (the turn's messages are the
    last ones sent: truncation drops the oldest), a text input's as `input`, the instructions' (the first
    message, before the turn) as `instructions`, a part of the answer's format as `text.format…`, and a
    function tool's as its place among `request`'s tools."""
    found = re.match(r"messages\[(\d+)\]", error.param or "")
    if found is not None:
        renamed = _message(int(found[1]), len(chat.messages), turn, request)
        if renamed is not None:
            whole = renamed in ("input", "instructions")
            old, new = (error.param or "", renamed) if whole else (found[0], renamed)
            error.message = error.message.replace(old, new)
            error.param = renamed if whole else renamed + (error.param or "")[found.end() :]
        return
    renamed = _RENAMED.get(error.param or "")
    if renamed is not None:  # quoted where the message says it (`4 messages` is prose)
        error.message = error.message.replace(f"'{error.param}'", f"'{renamed}'")
        for old, new in _FORMAT_PARTS:
            error.message = error.message.replace(old, new)
        error.param = renamed
    error.message = _CHAT_TOOL.sub(lambda tool: _tool(int(tool[1]), chat, request), error.message)


def _message(k: int, sent: int, turn: list[dict[str, Any]], request: ResponseRequest) -> str | None:
    """What the chat's `messages[k]` was sent as: `input[i]`, `input` (a text), `instructions`, or None (an
    earlier turn's)."""
    position = k - (sent - len(items.messages(turn)))
    if position < 0:
        return "instructions" if k == 0 and request.instructions else None
    if isinstance(request.input, str):
        return "input"
    for i, item in enumerate(turn):
        if item.get("type", "message") == "message" and len(items.messages(turn[: i + 1])) - 1 == position:
            return f"input[{i}]"
    return None


def _tool(i: int, chat: ChatCompletionRequest, request: ResponseRequest) -> str:
    """The chat's `tools[i].function` as `request` sent it: `tools[j]`, found by its name."""
    chat_tools = chat.tools or []
    name = (chat_tools[i].get("function") or {}).get("name") if i < len(chat_tools) else None
    for j, tool in enumerate(request.tools or []):
        if tool.type == "function" and tool.name == name:
            return f"tools[{j}]"
    return f"tools[{i}].function"
