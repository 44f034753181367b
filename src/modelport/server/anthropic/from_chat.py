"""A chat completion as the Messages API answers it: whole, as a `Message` (thinking, text and tool use
blocks, the stop reason, the usage), or streamed as Anthropic's events (`message_start`, a `ping`, each
block's `content_block_start` / `_delta` / `_stop`, `message_delta` with the stop reason and usage,
`message_stop`). A thinking block carries this server's seal of its text as its signature, so it can be
given back in a later turn; an error after the stream began is an `error` event, as Anthropic sends it."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any, Literal

from anthropic.types import (
    InputJSONDelta,
    Message,
    MessageDeltaUsage,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    SignatureDelta,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
    Usage,
)
from anthropic.types.raw_message_delta_event import Delta
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from modelport.errors import ModelportError
from modelport.protocol.answers import Events
from modelport.protocol.chunk_folds import thinking_of
from modelport.protocol.validation import json_value
from modelport.server.error_shapes import anthropic_error

Seal = Callable[[str], str]  # a thinking block's signature: this server's seal of its text ("" if none)
StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal"]
_STOP: dict[str | None, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


class Ping(BaseModel):
    """Anthropic's keep-alive event, sent once the message has started (the SDK has no type of it)."""

    type: Literal["ping"] = "ping"


def message_id(chat_id: str) -> str:
    """A message id made of the chat completion's (`chatcmpl-…` → `msg_…`)."""
    return "msg_" + chat_id.removeprefix("chatcmpl-")


def message(answer: ChatCompletion, seal: Seal) -> Message:
    """A whole chat completion as a `Message`."""
    choice = answer.choices[0]
    said = choice.message
    blocks: list[Any] = []
    reasoning = thinking_of(said.model_extra or {})
    if reasoning:
        blocks.append(ThinkingBlock(type="thinking", thinking=reasoning, signature=seal(reasoning)))
    if said.content:
        blocks.append(TextBlock(type="text", text=said.content))
    for call in said.tool_calls or []:
        if call.type == "function":
            blocks.append(
                ToolUseBlock(
                    type="tool_use",
                    id=call.id,
                    name=call.function.name,
                    input=_input(call.function.arguments),
                )
            )
    usage = answer.usage
    return Message(
        id=message_id(answer.id),
        type="message",
        role="assistant",
        model=answer.model,
        content=blocks,
        stop_reason=_STOP.get(choice.finish_reason, "end_turn"),
        stop_sequence=None,
        usage=_usage(usage.prompt_tokens, usage.completion_tokens, _cached(usage))
        if usage
        else _usage(0, 0, 0),
    )


def _input(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as the object Anthropic's `input` is (grammar-bound, so JSON)."""
    try:
        value = json_value(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _cached(usage: Any) -> int:
    details = getattr(usage, "prompt_tokens_details", None)
    return int(getattr(details, "cached_tokens", 0) or 0)


def _usage(prompt: int, completion: int, cached: int) -> Usage:
    # Anthropic's input_tokens are those not read from the cache; the cache's are beside them.
    return Usage(
        input_tokens=prompt - cached,
        output_tokens=completion,
        cache_read_input_tokens=cached,
        cache_creation_input_tokens=0,
    )


def frame(event: BaseModel) -> bytes:
    """One event as Anthropic's server-sent events carry it: named, then its JSON."""
    kind = getattr(event, "type", "message")
    return (
        b"event: "
        + kind.encode()
        + b"\ndata: "
        + event.model_dump_json(exclude_unset=True).encode()
        + b"\n\n"
    )


class _Blocks:
    """The block being streamed: which kind, at which index, and a thinking block's text so far."""

    def __init__(self) -> None:
        self.index = -1
        self.kind: str | None = None
        self.tool: int | None = None  # the chat tool call the open tool_use block is
        self.thinking: list[str] = []


async def events(answer: Events[ChatCompletion], model: str, seal: Seal) -> AsyncGenerator[bytes, None]:
    """A streamed chat completion as Anthropic's stream, framed."""
    start = Message(
        id="msg_",
        type="message",
        role="assistant",
        model=model,
        content=[],
        stop_reason=None,
        stop_sequence=None,
        usage=_usage(0, 0, 0),
    )
    blocks = _Blocks()
    finish: str | None = None
    usage: dict[str, Any] = {}
    started = False
    try:
        async for chunk in answer.items:
            if not started:
                start.id = message_id(str(chunk.get("id", "")))
                start.model = str(chunk.get("model") or model)
                yield frame(RawMessageStartEvent(type="message_start", message=start))
                yield frame(Ping())
                started = True
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or ():
                if choice.get("index", 0) != 0:
                    continue
                for piece in _pieces(choice.get("delta") or {}, blocks, seal):
                    yield piece
                finish = choice.get("finish_reason") or finish
        if not started:
            yield frame(RawMessageStartEvent(type="message_start", message=start))
        for piece in _close(blocks, seal):
            yield piece
        details = usage.get("prompt_tokens_details") or {}
        cached = int(details.get("cached_tokens") or 0)
        final = MessageDeltaUsage(
            input_tokens=int(usage.get("prompt_tokens", 0)) - cached,
            output_tokens=int(usage.get("completion_tokens", 0)),
            cache_read_input_tokens=cached,
        )
        delta = Delta(stop_reason=_STOP.get(finish, "end_turn"), stop_sequence=None)
        yield frame(RawMessageDeltaEvent(type="message_delta", delta=delta, usage=final))
        yield frame(RawMessageStopEvent(type="message_stop"))
    except ModelportError as error:
        yield frame(anthropic_error(error))
    finally:
        await answer.aclose()


def _pieces(delta: dict[str, Any], blocks: _Blocks, seal: Seal) -> list[bytes]:
    """The events one chat delta makes: a block opened where its kind changes, then its deltas."""
    out: list[bytes] = []
    thought = thinking_of(delta)
    if thought:
        if blocks.kind != "thinking":
            out += _open(blocks, "thinking", ThinkingBlock(type="thinking", thinking="", signature=""), seal)
        blocks.thinking.append(thought)
        out.append(_delta(blocks, ThinkingDelta(type="thinking_delta", thinking=thought)))
    text = delta.get("content")
    if text:
        if blocks.kind != "text":
            out += _open(blocks, "text", TextBlock(type="text", text=""), seal)
        out.append(_delta(blocks, TextDelta(type="text_delta", text=text)))
    for call in delta.get("tool_calls") or ():
        function = call.get("function") or {}
        if blocks.kind != "tool_use" or call.get("index", 0) != blocks.tool:
            begun = ToolUseBlock(
                type="tool_use", id=str(call.get("id") or ""), name=str(function.get("name") or ""), input={}
            )
            out += _open(blocks, "tool_use", begun, seal)
            blocks.tool = call.get("index", 0)
        if function.get("arguments"):
            out.append(
                _delta(blocks, InputJSONDelta(type="input_json_delta", partial_json=function["arguments"]))
            )
    return out


def _open(blocks: _Blocks, kind: str, block: Any, seal: Seal) -> list[bytes]:
    out = _close(blocks, seal)
    blocks.index += 1
    blocks.kind = kind
    out.append(
        frame(RawContentBlockStartEvent(type="content_block_start", index=blocks.index, content_block=block))
    )
    return out


def _delta(blocks: _Blocks, delta: Any) -> bytes:
    return frame(RawContentBlockDeltaEvent(type="content_block_delta", index=blocks.index, delta=delta))


def _close(blocks: _Blocks, seal: Seal) -> list[bytes]:
    """The open block's end; a thinking block's signature first."""
    if blocks.kind is None:
        return []
    out = []
    if blocks.kind == "thinking":
        signature = seal("".join(blocks.thinking))
        out.append(_delta(blocks, SignatureDelta(type="signature_delta", signature=signature)))
        blocks.thinking = []
    out.append(frame(RawContentBlockStopEvent(type="content_block_stop", index=blocks.index)))
    blocks.kind, blocks.tool = None, None
    return out
