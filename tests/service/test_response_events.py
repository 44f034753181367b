"""The Responses API's events and output items, on their own: a streamed turn's chat chunks become the openai
SDK's own event types, in the order its stream helper checks, and leave as what the OpenResponses
specification requires; the response they end with holds the same output as the one a non-streamed turn
makes of the whole answer; a stored response replays as the same events."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from modelport.protocol.answers import Events, listed
from modelport.protocol.chunk_folds import ChatFold
from modelport.protocol.response_object import ResponseObject
from modelport.service.responses.client_tools import ClientTools
from modelport.service.responses.event_stream import RESPONSE_EVENTS, replayed, wire
from modelport.service.responses.output import completion_output
from modelport.service.responses.response_events import ResponseEvents
from tests.support import openresponses

EVENTS = TypeAdapter(ResponseStreamEvent)
HEAD = {"id": "chatcmpl-1", "created": 1, "model": "m", "object": "chat.completion.chunk"}


def chunk(delta: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {**HEAD, "choices": [{"index": 0, "delta": delta, **more}]}


def scored(text: str) -> dict[str, Any]:
    return {"content": [{"token": text, "logprob": -0.5, "bytes": None, "top_logprobs": []}]}


def call(**piece: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": 0, **piece}]}


CHUNKS: list[dict[str, Any]] = [
    chunk({"role": "assistant", "content": None}),
    chunk({"content": "I will "}, logprobs=scored("I will ")),
    chunk({"content": "add."}, logprobs=scored("add.")),
    chunk(call(id="call_a", type="function", function={"name": "add", "arguments": ""})),
    chunk(call(function={"arguments": '{"a": '})),
    chunk(call(function={"arguments": "1}"})),
    chunk({}, finish_reason="tool_calls"),
    {**HEAD, "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}},
]


def skeleton() -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "in_progress",
        "model": "m",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None,
        "error": None,
        "incomplete_details": None,
    }


def streamed() -> list[dict[str, Any]]:
    """The events of CHUNKS, as the wire carries them."""
    return asyncio.run(_sent(_built()))


def _built() -> list[ResponseStreamEvent]:
    builder = ResponseEvents(ResponseObject.model_validate(skeleton()))
    events = builder.start()
    for chunk in CHUNKS:
        events += builder.feed(chunk)
    return events + builder.finish()


async def _sent(events: list[ResponseStreamEvent]) -> list[dict[str, Any]]:
    async def made() -> Any:
        for event in events:
            yield event

    return [event async for event in wire(made())]


def without_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in item.items() if k != "id"} for item in items]


def test_chunks_become_the_events_the_sdk_expects_in_its_order() -> None:
    assert all(type(e) is type(EVENTS.validate_python(e.to_dict())) for e in _built())  # its own types
    events = streamed()
    for event in events:
        EVENTS.validate_python(event)
    # What the specification asks of each event (the lifecycle events' response is checked whole over HTTP,
    # tests/service/test_responses.py); a response's times in whole seconds, as it requires.
    items = [e for e in events if "response" not in e]
    assert not [found for e in items if (found := openresponses.problems(e, openresponses.EVENT))]
    assert [type(e["response"]["created_at"]) for e in events if "response" in e] == [int] * 3
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    added = [e["item"]["id"] for e in events if e["type"] == "response.output_item.added"]
    done = [e["item"]["id"] for e in events if e["type"] == "response.output_item.done"]
    assert added == done  # each item keeps its id from announcement to close


def test_events_pass_on_typed_and_are_written_as_the_store_keeps_them() -> None:
    # The HTTP face writes each event from its type; the store keeps `wire`'s JSON; a background job's
    # events read back from the store come typed again: all three say the same.
    built = _built()
    for event, kept in zip(built, asyncio.run(_sent(built)), strict=True):
        head, _, data = RESPONSE_EVENTS.frame(event).partition(b"\ndata: ")
        assert head == b"event: " + event.type.encode()
        assert orjson.loads(data) == kept == RESPONSE_EVENTS.wire(event)
        again = RESPONSE_EVENTS.parse(kept)
        assert type(again) is type(event)
        assert RESPONSE_EVENTS.wire(again) == kept
        if "response" in kept:  # the lifecycle's response as its own type, built or read back
            for written in (event, again):
                sent = orjson.loads(RESPONSE_EVENTS.frame(written).partition(b"data: ")[2])
                assert type(sent["response"]["created_at"]) is int

    async def handed() -> list[Any]:
        return [event async for event in Events(listed(list(built)), RESPONSE_EVENTS).typed()]

    assert all(a is b for a, b in zip(asyncio.run(handed()), built, strict=True))  # in-process: as built


def test_the_streamed_response_holds_what_a_whole_answer_makes() -> None:
    final = Response.model_validate(streamed()[-1]["response"])
    fold = ChatFold()
    for chunk in CHUNKS:
        fold.add(chunk)
    whole = completion_output(fold.whole()["choices"][0], ClientTools())
    made = Response.model_validate({**skeleton(), "output": whole})
    assert without_ids([item.model_dump() for item in final.output]) == without_ids(
        [item.model_dump() for item in made.output]
    )
    assert final.output_text == "I will add."
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (4, 6)
    assert final.status == "completed"


def test_a_stored_response_replays_as_the_events_it_streamed() -> None:
    live = streamed()

    async def replay() -> list[dict[str, Any]]:
        return [event async for event in wire(replayed(live[-1]["response"], None))]

    again = asyncio.run(replay())
    # The same events, but that each text and each call's arguments arrive in one delta.
    kinds: list[str] = []
    for event in live:
        if not (kinds and event["type"].endswith(".delta") and kinds[-1] == event["type"]):
            kinds.append(event["type"])
    assert [e["type"] for e in again] == kinds
    assert again[-1]["response"] == live[-1]["response"]
    texts = [e["delta"] for e in again if e["type"] == "response.output_text.delta"]
    assert texts == ["I will add."]  # the whole text in one delta
    later = asyncio.run(_after(live[-1]["response"], 3))
    assert [e["sequence_number"] for e in later] == list(range(4, len(again)))


async def _after(response: dict[str, Any], after: int) -> list[dict[str, Any]]:
    return [event async for event in wire(replayed(response, after))]


def test_a_turn_that_fails_carries_an_error_code_its_type_allows() -> None:
    # A later tool round that overflows the model's context failed the turn with `context_length_exceeded`,
    # which a Response's error may not carry: the SDK refused the object, and retried for minutes.
    for error, code in (
        (
            {"type": "invalid_request_error", "code": "context_length_exceeded", "message": "too long"},
            "invalid_prompt",
        ),
        ({"type": "server_error", "code": "predictor_error", "message": "it broke"}, "server_error"),
        (
            {"type": "rate_limit_error", "code": "rate_limit_exceeded", "message": "slow down"},
            "rate_limit_exceeded",
        ),
    ):
        builder = ResponseEvents(ResponseObject.model_validate(skeleton()))
        builder.start()
        for piece in CHUNKS[:3]:
            builder.feed(piece)
        closing = builder.fail(error)[-1]
        assert closing.type == "response.failed"
        failed = closing.response
        assert (failed.status, failed.error and failed.error.code) == ("failed", code)
        assert failed.error.message == error["message"]
        assert failed.output[0].type == "message"  # what was said before it failed is kept


def test_a_turn_whose_client_left_is_a_response_its_type_takes() -> None:
    # A streamed turn whose client left was stored `incomplete` for the reason "interrupted", which a
    # Response's `incomplete_details` may not carry: retrieving it failed (a 500).
    for background, status in ((False, "incomplete"), (True, "cancelled")):
        builder = ResponseEvents(ResponseObject.model_validate(skeleton()))
        builder.start()
        for piece in CHUNKS[:3]:
            builder.feed(piece)
        builder.left(background)
        kept = Response.model_validate(builder.response.to_dict(mode="json"))
        assert kept.status == status
        assert kept.output_text == "I will add."  # what was said before the client left
