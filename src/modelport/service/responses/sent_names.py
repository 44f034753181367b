"""How a Responses request named what became its chat request (`protocol.sent_as`): its `instructions`, its
`input` (a text) or `input[i]`, flat `tools[j]`, `text.format` and `max_output_tokens`."""

from __future__ import annotations

from typing import Any

from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest
from modelport.protocol.response_request import ResponseRequest
from modelport.protocol.sent_as import Message, SentAs, rename
from modelport.service.responses import items

# The chat's fields a Responses request sends under other names.
_FIELDS = {
    "messages": "input",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
}


def name_as_sent(
    error: InvalidRequestError,
    chat: ChatCompletionRequest,
    turn: list[dict[str, Any]],
    request: ResponseRequest,
) -> None:
    """`error` naming what `request` sent: the turn's messages are the last of the chat's (before them, the
    instructions, then earlier turns'; truncation drops the oldest of those)."""
    turned: list[Message | None] = []
    for i in items.made_by(turn):  # a message's parts are named as in the chat; a call's output is whole
        inside = turn[i].get("type", "message") == "message"
        turned.append(Message("input") if isinstance(request.input, str) else Message(f"input[{i}]", inside))
    before: list[Message | None] = [None] * (len(chat.messages) - len(turned))
    if before and request.instructions:
        before[0] = Message("instructions")
    functions = [(j, tool.name) for j, tool in enumerate(request.tools or []) if tool.type == "function"]
    places = {name: f"tools[{j}]" for j, name in functions}
    tools = [places.get((tool.get("function") or {}).get("name", "")) for tool in chat.tools or []]
    sent = SentAs([*before, *turned], _FIELDS, tools, answer_format=("text.format", "text.format.schema"))
    rename(error, sent)
