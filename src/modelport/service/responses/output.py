"""A Responses turn's output: the items a chat answer makes (a `message` for its text, a `function_call`
per tool call) and its usage, built as the `openai` package's types. Built from a whole chat completion when
the turn is not streamed, and by the event builder as each item of a streamed one closes. Their inputs are
the chat path's chunks and answers as the wire carries them (JSON objects)."""

from __future__ import annotations

from typing import Any, Literal

from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_output_text import Logprob, LogprobTopLogprob
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from modelport.service.responses.items import new_item_id

Status = Literal["in_progress", "completed", "incomplete"]


def message_item(item_id: str, text: str, logprobs: list[Logprob], status: Status) -> ResponseOutputMessage:
    """An assistant message item with one `output_text` part."""
    part = ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=logprobs)
    return ResponseOutputMessage(id=item_id, type="message", status=status, role="assistant", content=[part])


def call_item(item_id: str, call: dict[str, Any], status: Status) -> ResponseFunctionToolCall:
    """A `function_call` item of a chat tool call (`{"id", "function": {"name", "arguments"}}`)."""
    function = call.get("function") or {}
    return ResponseFunctionToolCall(
        id=item_id,
        type="function_call",
        status=status,
        call_id=call.get("id") or new_item_id("call"),
        name=function.get("name") or "",
        arguments=function.get("arguments") or "",
    )


def completion_output(choice: dict[str, Any]) -> list[ResponseOutputMessage | ResponseFunctionToolCall]:
    """The items of a whole chat completion's choice: its text, then its calls; incomplete when the token
    budget cut it."""
    status: Status = "incomplete" if choice.get("finish_reason") == "length" else "completed"
    message = choice.get("message") or {}
    items: list[ResponseOutputMessage | ResponseFunctionToolCall] = []
    if message.get("content"):
        content = (choice.get("logprobs") or {}).get("content") or []
        items.append(
            message_item(new_item_id("msg"), message["content"], [logprob(e) for e in content], status)
        )
    items += [call_item(new_item_id("fc"), call, status) for call in message.get("tool_calls") or []]
    return items


def usage(chat: dict[str, Any]) -> ResponseUsage:
    """A chat completion's usage, as a response's."""
    cached = (chat.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return ResponseUsage(
        input_tokens=int(chat.get("prompt_tokens") or 0),
        input_tokens_details=InputTokensDetails(cached_tokens=int(cached), cache_write_tokens=0),
        output_tokens=int(chat.get("completion_tokens") or 0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=int(chat.get("total_tokens") or 0),
    )


def added_usage(earlier: ResponseUsage | None, now: ResponseUsage) -> ResponseUsage:
    """The usage of a turn's rounds so far: `earlier` (None before the first) and this one's."""
    if earlier is None:
        return now
    cached = earlier.input_tokens_details.cached_tokens + now.input_tokens_details.cached_tokens
    return now.model_copy(
        update={
            "input_tokens": earlier.input_tokens + now.input_tokens,
            "output_tokens": earlier.output_tokens + now.output_tokens,
            "total_tokens": earlier.total_tokens + now.total_tokens,
            "input_tokens_details": now.input_tokens_details.model_copy(update={"cached_tokens": cached}),
        }
    )


def logprob(entry: dict[str, Any]) -> Logprob:
    """A chat token's log-probability entry, as an `output_text` part's."""
    top = [
        LogprobTopLogprob(token=t.get("token", ""), logprob=t.get("logprob", 0.0), bytes=t.get("bytes") or [])
        for t in entry.get("top_logprobs") or []
    ]
    return Logprob(
        token=entry.get("token", ""),
        logprob=entry.get("logprob", 0.0),
        bytes=entry.get("bytes") or [],
        top_logprobs=top,
    )
