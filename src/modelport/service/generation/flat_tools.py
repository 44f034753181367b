"""Function tools as the Responses and Realtime APIs write them (flat: `{"type": "function", "name", …}`)
and their `tool_choice`, as the chat path takes them (`{"type": "function", "function": {…}}`): the one
translation both build their chat request with."""

from __future__ import annotations

from typing import Any


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
