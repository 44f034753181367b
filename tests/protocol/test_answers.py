"""The answer shapes on their own: how each kind of event stream is framed on the wire, what a stream folds
into, and bytes read whole or in pieces."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any, get_args

from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import (
    ResponseCustomToolCallInputDeltaEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseTextDeltaEvent,
)

from modelport.protocol.answers import Binary, EventKind, Events, listed
from modelport.protocol.event_kinds import CHAT_CHUNKS
from modelport.service.generation.framing import framed
from modelport.service.generation.vllm_generate import FRAMES
from modelport.service.responses.event_stream import RESPONSE_EVENTS

CHUNK = {
    "id": "x",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}],
}


def test_each_kind_frames_its_events_as_its_wire_does() -> None:
    assert CHAT_CHUNKS.frame({"a": 1}) == b'data: {"a":1}\n\n'
    assert CHAT_CHUNKS.end == b"data: [DONE]\n\n"
    event = {"type": "response.created", "sequence_number": 0}
    assert (
        RESPONSE_EVENTS.frame(event)
        == b'event: response.created\ndata: {"type":"response.created","sequence_number":0}\n\n'
    )
    assert RESPONSE_EVENTS.end == b""  # the Responses API ends with its last event, no [DONE]
    assert FRAMES.frame({"text": ["a"]}) == b'{"text":["a"]}\x00'
    error = {"error": {"message": "no"}}
    assert CHAT_CHUNKS.error_frame(error) == b'data: {"error":{"message":"no"}}\n\n'
    assert FRAMES.error_frame(error) == b'{"error":{"message":"no"}}\x00'


def test_the_deltas_written_without_a_look_at_each_value_s_class_are_written_as_with_one() -> None:
    """Each token of a streamed response is a delta event that pydantic writes without `serialize_as_any`
    (`EventKind.plain`): what that leaves out must change nothing in what the wire carries."""
    fields = {"item_id": "msg_1", "output_index": 0, "sequence_number": 3, "delta": "hi"}
    token = {"token": "hi", "logprob": -0.5, "bytes": [104, 105], "top_logprobs": []}
    made = {
        ResponseTextDeltaEvent: {**fields, "content_index": 0, "logprobs": [token]},
        ResponseReasoningTextDeltaEvent: {**fields, "content_index": 0},
        ResponseReasoningSummaryTextDeltaEvent: {**fields, "summary_index": 0},
        ResponseFunctionCallArgumentsDeltaEvent: fields,
        ResponseCustomToolCallInputDeltaEvent: fields,
    }
    assert set(made) == RESPONSE_EVENTS.plain
    for kind, given in made.items():
        (named,) = get_args(kind.model_fields["type"].annotation)
        event = kind.model_validate({**given, "type": named})
        data = event.model_dump_json(by_alias=True, exclude_unset=True, serialize_as_any=True)
        assert RESPONSE_EVENTS.frame(event) == f"event: {event.type}\ndata: {data}\n\n".encode()


def test_a_stream_is_typed_one_event_at_a_time_and_folds_into_its_whole() -> None:
    async def run() -> tuple[list[Any], ChatCompletion]:
        typed = [event async for event in Events(listed([CHUNK]), CHAT_CHUNKS).typed()]
        whole = await Events(listed([CHUNK, CHUNK]), CHAT_CHUNKS).whole()
        return typed, whole

    typed, whole = asyncio.run(run())
    assert isinstance(typed[0], ChatCompletionChunk)
    assert isinstance(whole, ChatCompletion)
    assert whole.choices[0].message.content == "hihi"


def test_closing_a_stream_closes_the_work_behind_it() -> None:
    closed = []

    async def work() -> AsyncGenerator[dict[str, Any], None]:
        try:
            yield CHUNK
            yield CHUNK
        finally:
            closed.append(True)

    async def run() -> None:
        events = Events(work(), EventKind("test"))
        async for _ in events.typed():
            break
        await events.aclose()

    asyncio.run(run())
    assert closed == [True]


def test_usage_comes_summed_in_a_closing_chunk_of_its_own() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 1}}
    second = {**CHUNK, "choices": [{**CHUNK["choices"][0], "index": 1}]}
    pieces = [{**CHUNK, "usage": usage}, {**second, "usage": {"prompt_tokens": 0, "completion_tokens": 4}}]

    async def run() -> list[dict[str, Any]]:
        return [chunk async for chunk in framed(listed(pieces), "ours", True, "chatcmpl", "tests.tiny")]

    out = asyncio.run(run())
    assert {c["id"] for c in out} == {out[0]["id"]}
    assert out[0]["id"].startswith("chatcmpl-")
    assert {c["model"] for c in out} == {"ours"}
    assert all("usage" not in c for c in out[:-1])
    assert out[-1]["choices"] == []
    assert out[-1]["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 6,
        "total_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 1},
    }


def test_bytes_read_whole_or_in_pieces() -> None:
    async def chunks() -> AsyncGenerator[bytes, None]:
        yield b"ab"
        yield b"c"

    async def run() -> tuple[bytes, list[bytes], bytes]:
        whole = await Binary("audio/wav", chunks=chunks()).read()
        pieces = [piece async for piece in Binary("audio/wav", chunks=chunks()).pieces()]
        return whole, pieces, await Binary("text/plain", b"done").read()

    assert asyncio.run(run()) == (b"abc", [b"ab", b"c"], b"done")
