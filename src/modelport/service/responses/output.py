"""A Responses turn's output: the items a chat answer makes (a `message` for its text, a `function_call`
per tool call) and its usage, in the Responses API's shapes. Built from a whole chat completion when the
turn is not streamed, and by the event builder as each item of a streamed one closes."""

from __future__ import annotations

from typing import Any

from modelport.service.responses.items import new_item_id


def message_item(item_id: str, text: str, logprobs: list[dict[str, Any]], status: str) -> dict[str, Any]:
    """An assistant message item with one `output_text` part."""
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs}
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": [part]}


def call_item(item_id: str, call: dict[str, Any], status: str) -> dict[str, Any]:
    """A `function_call` item of a chat tool call (`{"id", "function": {"name", "arguments"}}`)."""
    function = call.get("function") or {}
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call.get("id") or new_item_id("call"),
        "name": function.get("name") or "",
        "arguments": function.get("arguments") or "",
    }


def completion_output(choice: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of a whole chat completion's choice: its text, then its calls; incomplete when the token
    budget cut it."""
    status = "incomplete" if choice.get("finish_reason") == "length" else "completed"
    message = choice.get("message") or {}
    items = []
    if message.get("content"):
        content = (choice.get("logprobs") or {}).get("content") or []
        items.append(
            message_item(new_item_id("msg"), message["content"], [logprob(e) for e in content], status)
        )
    items += [call_item(new_item_id("fc"), call, status) for call in message.get("tool_calls") or []]
    return items


def usage(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat completion's usage, as a response's."""
    cached = (chat.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "input_tokens": int(chat.get("prompt_tokens") or 0),
        "input_tokens_details": {"cached_tokens": int(cached), "cache_write_tokens": 0},
        "output_tokens": int(chat.get("completion_tokens") or 0),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": int(chat.get("total_tokens") or 0),
    }


def logprob(entry: dict[str, Any]) -> dict[str, Any]:
    """A chat token's log-probability entry, as an `output_text` part's."""
    top = [
        {"token": t.get("token", ""), "logprob": t.get("logprob", 0.0), "bytes": t.get("bytes") or []}
        for t in entry.get("top_logprobs") or []
    ]
    return {
        "token": entry.get("token", ""),
        "logprob": entry.get("logprob", 0.0),
        "bytes": entry.get("bytes") or [],
        "top_logprobs": top,
    }
