"""The chat request a Responses turn or a realtime response stands for, built by the one function both
call; and function tools as those two APIs write them (flat: `{"type": "function", "name", …}`) with their
`tool_choice`, as the chat path takes them (`{"type": "function", "function": {…}}`)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest


def chat_request(
    model: str,
    instructions: str | None,
    messages: list[dict[str, Any]],
    fields: dict[str, Any],
    *,
    stream: bool,
    param: str,
) -> ChatCompletionRequest:
    """The chat request: the instructions as the system message before `messages`, the chat parameters in
    `fields` (tools already as chat's), streamed with its usage when `stream`; never stored as a chat
    completion (the turn is kept as what it is). A value the chat request refuses is a 400 naming `param`,
    the part of the caller's request it came from."""
    body = {
        **fields,
        "model": model,
        "messages": ([{"role": "system", "content": instructions}] if instructions else []) + messages,
        "stream": stream,
        "store": False,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidRequestError(f"Invalid request ({where}): {first['msg']}", param=param) from None


def chat_function(tool: dict[str, Any]) -> dict[str, Any]:
    """A flat function tool as a chat tool."""
    function = {
        k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None
    }
    return {"type": "function", "function": function}


def chat_choice(choice: str | dict[str, Any]) -> str | dict[str, Any] | None:
    """A flat `tool_choice` as chat's: a mode as it is, a named function as chat names one; None for a
    choice that names no function."""
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    return None
