"""A choice's chunks read by the model's format as they stream: the raw text each chunk carries becomes the
deltas its reader makes of it (`reasoning_content`, `content` without the format's markers, `tool_calls`), the
last chunk of a choice that called a tool finishes with `tool_calls`, and the usage counts the tokens spent
thinking (`completion_tokens_details.reasoning_tokens`: each chunk carries one token, and a chunk whose text
was thinking counts as one, the markers of a thinking that said anything among them)."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from modelport import context
from modelport.protocol.chunk_folds import merge_delta
from modelport.service.generation.formats.readers import MarkerFilter, Reader

log = logging.getLogger("modelport.service")


async def read(
    chunks: AsyncGenerator[dict[str, Any], None],
    new_reader: Callable[[], Reader],
    markers: tuple[str, ...] = (),
    legacy: bool = False,
    thinks: bool = False,
    thought_is_answer: bool = False,
) -> AsyncGenerator[dict[str, Any], None]:
    """`chunks` with their text read by a reader per choice; `thinks`: the usage says how many tokens went
    to thinking (it always does when some did); `thought_is_answer`: what the engine read as thinking is the
    answer's text (modelport's JSON answer, held from its first token, on a family whose prompt opens the
    thinking the engine reads: K2 Horizon's), less what the engine puts before it (the opening the prompt
    wrote, where the engine gives it back)."""
    readers: dict[int, Reader] = {}
    filters: dict[int, MarkerFilter] = {}
    thought: dict[int, int] = {}
    marking: dict[int, int] = {}  # tokens of thinking markers not yet followed by any thought
    begun: set[int] = set()  # choices whose JSON answer has begun (`thought_is_answer`)
    try:
        async for chunk in chunks:
            for choice in chunk.get("choices") or []:
                index = choice.get("index", 0)
                if index not in readers:
                    readers[index], filters[index] = new_reader(), MarkerFilter(markers)
                    thought[index] = marking[index] = 0
                reader, kept = readers[index], filters[index]
                delta = choice.get("delta") or {}
                text = delta.pop("content", None) or ""
                if thought_is_answer:
                    given = delta.pop("reasoning_content", None) or ""
                    if index not in begun:  # the JSON's first character is the model's first
                        at = given.find("{")
                        given = given[at:] if at >= 0 else ""
                        if at >= 0 or text:
                            begun.add(index)
                    text = given + text
                thinking = reader.thinking
                pieces = reader.feed(text) if text else []
                finished = choice.get("finish_reason")
                if finished:
                    pieces += reader.flush(finished == "length")
                merged: dict[str, Any] = {}
                for piece in pieces:
                    merge_delta(merged, piece)
                # A thinking block's tokens count, its markers with them; an empty one's (a thinking the
                # effort closed at once) do not.
                said = bool(delta.get("reasoning_content") or merged.get("reasoning_content"))
                if said:
                    thought[index] += 1 + marking[index]
                    marking[index] = 0
                elif text and (thinking or reader.thinking):
                    if thought[index]:
                        thought[index] += 1
                    else:
                        marking[index] += 1
                content = kept.feed(merged.pop("content", "") or "") + (kept.flush() if finished else "")
                if content:
                    merged["content"] = content
                merge_delta(delta, merged)  # beside what the engine read itself (its `reasoning_content`)
                if delta.get("role") and not {"content", "tool_calls", "reasoning_content"} & delta.keys():
                    delta["content"] = None
                choice["delta"] = delta
                if finished == "stop" and reader.calls:
                    choice["finish_reason"] = "function_call" if legacy else "tool_calls"
                if finished and reader.strayed:
                    log.warning(
                        "request %s: the model's answer strayed from its format; its text is the content",
                        context.current().request_id or "-",
                    )
            # Tokens of a format's framing carry no text of their own: drop the chunks they leave empty.
            choices = [
                c
                for c in chunk.get("choices") or []
                if c["delta"] or c.get("finish_reason") or c.get("logprobs")
            ]
            usage = chunk.get("usage")
            if usage and (thinks or any(thought.values())):
                details = dict(usage.get("completion_tokens_details") or {})
                details["reasoning_tokens"] = int(details.get("reasoning_tokens") or 0) + sum(
                    thought.values()
                )
                chunk["usage"] = {**usage, "completion_tokens_details": details}
            if choices or usage or not chunk.get("choices"):
                yield {**chunk, "choices": choices}
    finally:
        await chunks.aclose()
