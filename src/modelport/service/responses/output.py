"""A Responses turn's output: the items a chat answer makes (a `reasoning` item for its thinking, a
`message` for its text, a `function_call` per tool call) and its usage, built as the `openai` package's
types. Built from a whole chat completion when the turn is not streamed, and by the event builder as each item
of a streamed one closes. Their inputs are the chat path's chunks and answers as the wire carries them (JSON
objects)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from openai.types.responses import (
    ResponseCustomToolCall,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseUsage,
)
from openai.types.responses.response_output_text import Logprob, LogprobTopLogprob
from openai.types.responses.response_reasoning_item import Content as ReasoningText
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from modelport.protocol.chunk_folds import thinking_of
from modelport.service.responses.client_tools import ClientTools
from modelport.service.responses.defined_tools import DefinedCall
from modelport.service.responses.items import new_item_id

Status = Literal["in_progress", "completed", "incomplete"]


def reasoning_item(
    item_id: str, text: str, status: Status, summary: bool, sealed: str | None = None
) -> ResponseReasoningItem:
    """A reasoning item: its thinking as `reasoning_text`, and as its summary when one is asked for (the
    summary is the thinking itself: no second model summarises it here); sealed for the client to give back
    when it asked (`encrypted_content`)."""
    item = ResponseReasoningItem(
        id=item_id,
        type="reasoning",
        status=status,
        summary=[Summary(type="summary_text", text=text)] if summary and text else [],
        content=[ReasoningText(type="reasoning_text", text=text)],
    )
    if sealed is not None:
        item.encrypted_content = sealed
    return item


def message_item(item_id: str, text: str, logprobs: list[Logprob], status: Status) -> ResponseOutputMessage:
    """An assistant message item with one `output_text` part."""
    part = ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=logprobs)
    return ResponseOutputMessage(id=item_id, type="message", status=status, role="assistant", content=[part])


Output = (
    ResponseReasoningItem
    | ResponseOutputMessage
    | ResponseFunctionToolCall
    | ResponseCustomToolCall
    | DefinedCall
)


def completion_output(
    choice: dict[str, Any],
    tools: ClientTools,
    summary: bool = False,
    seal: Callable[[str], str] | None = None,
) -> list[Output]:
    """The items of a whole chat completion's choice: its thinking, its text, then its calls (each the item
    of its tool's kind); incomplete when the token budget cut it. `summary`: its thinking is summarised;
    `seal`: sealed for the client."""
    status: Status = "incomplete" if choice.get("finish_reason") == "length" else "completed"
    message = choice.get("message") or {}
    items: list[Output] = []
    text = thinking_of(message)
    if text:
        sealed = seal(text) if seal is not None else None
        items.append(reasoning_item(new_item_id("rs"), text, status, summary, sealed))
    if message.get("content"):
        content = (choice.get("logprobs") or {}).get("content") or []
        items.append(
            message_item(new_item_id("msg"), message["content"], [logprob(e) for e in content], status)
        )
    items += [tools.item(new_item_id("fc"), call, status) for call in message.get("tool_calls") or []]
    return items


def usage(chat: dict[str, Any]) -> ResponseUsage:
    """A chat completion's usage, as a response's."""
    cached = (chat.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    thought_tokens = (chat.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return ResponseUsage(
        input_tokens=int(chat.get("prompt_tokens") or 0),
        input_tokens_details=InputTokensDetails(cached_tokens=int(cached), cache_write_tokens=0),
        output_tokens=int(chat.get("completion_tokens") or 0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=int(thought_tokens)),
        total_tokens=int(chat.get("total_tokens") or 0),
    )


def added_usage(earlier: ResponseUsage | None, now: ResponseUsage) -> ResponseUsage:
    """The usage of a turn's rounds so far: `earlier` (None before the first) and this one's."""
    if earlier is None:
        return now
    cached = earlier.input_tokens_details.cached_tokens + now.input_tokens_details.cached_tokens
    thought_tokens = sum(u.output_tokens_details.reasoning_tokens for u in (earlier, now))
    return now.model_copy(
        update={
            "input_tokens": earlier.input_tokens + now.input_tokens,
            "output_tokens": earlier.output_tokens + now.output_tokens,
            "total_tokens": earlier.total_tokens + now.total_tokens,
            "input_tokens_details": now.input_tokens_details.model_copy(update={"cached_tokens": cached}),
            "output_tokens_details": OutputTokensDetails(reasoning_tokens=thought_tokens),
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
