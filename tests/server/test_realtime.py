"""The Realtime API over WebSocket, through the openai SDK's `realtime.connect()`: a text turn, an audio turn
(speech Piper made, sent at real-time pace and faster, found by the speech detector, transcribed, answered
in speech), a function call and its output, `response.cancel`, barge-in and `conversation.item.truncate`, a
transcription session, bad events answered with `error` events. Every server event is validated against
the openai package's `RealtimeServerEvent` types, as the Agents SDK does."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import time
import typing
from pathlib import Path
from typing import Any, Literal

import av
import numpy as np
import openai
import pytest
from openai.types.realtime import RealtimeClientEvent, RealtimeServerEvent
from pydantic import TypeAdapter

from modelport.settings import (
    DEFAULT_CHAT,
    DEFAULT_REALTIME,
    DEFAULT_TRANSCRIPTION,
    ModelConfig,
    Settings,
)
from tests.server.conftest import QUESTION, VOICE_MODELS, listening_settings
from tests.service.test_audio import word_error_rate
from tests.support.faces import Faces, faces
from tests.support.live import health_probed
from tests.support.machine_load import slack

pytestmark = pytest.mark.models  # real models: not the unit tier

SERVER_EVENT: TypeAdapter[Any] = TypeAdapter(RealtimeServerEvent)


@functools.cache
def beta_event() -> TypeAdapter[Any]:
    """The beta protocol's server events, read by the test that speaks it: the openai package's beta types
    take half a second to import, which every worker's collection of this file would pay."""
    from openai.types.beta.realtime import RealtimeServerEvent as BetaServerEvent

    return TypeAdapter(BetaServerEvent)


RATE = 24_000
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city",
    # The city's length bounded, as a tool should bound what a small model writes: a call the grammar holds to
    # a bare string ran on for 1,000 tokens once (107 s, where it takes 1).
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 40}},
        "required": ["city"],
    },
}


def connect(served: Faces, **options: Any) -> Any:
    client = openai.AsyncOpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0)
    return client.realtime.connect(max_retries=0, **options)


async def until(connection: Any, last: str, seen: list[Any] | None = None) -> list[Any]:
    """Server events (each validated against its openai type) up to and including the first `last`."""
    events = [] if seen is None else seen
    while True:
        event = SERVER_EVENT.validate_json(await asyncio.wait_for(connection.recv_bytes(), 60))
        events.append(event)
        if event.type == last:
            return events


def kinds(events: list[Any]) -> list[str]:
    return [e.type for e in events]


async def say(connection: Any, pcm: bytes, chunk_ms: int, pace: float, silence_ms: int = 1200) -> None:
    """Send `pcm` then silence in chunks of `chunk_ms`, at `pace` times real time (0: as fast as possible)."""
    audio = pcm + bytes(RATE * 2 * silence_ms // 1000)
    step = RATE * 2 * chunk_ms // 1000
    for at in range(0, len(audio), step):
        await connection.input_audio_buffer.append(audio=base64.b64encode(audio[at : at + step]).decode())
        if pace:
            await asyncio.sleep(chunk_ms / 1000 / pace)


def test_a_text_turn(voice: Faces) -> None:
    async def run() -> list[Any]:
        async with connect(voice, model="gpt-realtime") as connection:
            created = await until(connection, "session.created")
            assert created[0].session.type == "realtime"
            session = {"type": "realtime", "output_modalities": ["text"], "max_output_tokens": 64}
            await connection.session.update(session=session)
            await until(connection, "session.updated")
            await connection.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Say hello."}],
                }
            )
            await connection.response.create()
            return await until(connection, "response.done")

    events = asyncio.run(run())
    order = kinds(events)
    assert (
        order.index("response.created")
        < order.index("response.output_text.delta")
        < order.index("response.done")
    )
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = events[-1].response
    assert done.status in ("completed", "incomplete")
    assert done.output[0].content[0].text == text
    assert text.strip()
    assert done.usage.output_tokens > 0


@pytest.mark.parametrize(("chunk_ms", "pace"), [(100, 1.0), (20, 0.0)])
def test_an_audio_turn_is_heard_and_answered_in_speech(
    voice: Faces, question: bytes, chunk_ms: int, pace: float
) -> None:
    async def run() -> list[Any]:
        async with connect(voice, model="gpt-4o-realtime-preview") as connection:
            await until(connection, "session.created")
            transcription = {"model": "gpt-4o-transcribe", "language": "en"}
            # A 135M model may ramble at its default temperature: an answer of a few sentences is enough.
            session = {
                "type": "realtime",
                "audio": {"input": {"transcription": transcription}},
                "max_output_tokens": 64,
            }
            await connection.session.update(session=session)
            await until(connection, "session.updated")
            await say(connection, question, chunk_ms, pace)
            seen: list[Any] = []
            await until(connection, "response.done", seen)
            if "conversation.item.input_audio_transcription.completed" not in kinds(seen):
                await until(connection, "conversation.item.input_audio_transcription.completed", seen)
            return seen

    events = asyncio.run(run())
    order = kinds(events)
    for kind in (
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
    ):
        assert kind in order
    started = next(e for e in events if e.type == "input_audio_buffer.speech_started")
    stopped = next(e for e in events if e.type == "input_audio_buffer.speech_stopped")
    spoken_ms = len(question) / 2 / RATE * 1000
    assert started.audio_start_ms < 400
    assert spoken_ms < stopped.audio_end_ms < spoken_ms + 1200
    heard = next(e for e in events if e.type == "conversation.item.input_audio_transcription.completed")
    assert word_error_rate(QUESTION, heard.transcript) <= 0.25
    audio = b"".join(base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta")
    assert len(audio) / 2 / RATE > 0.5  # the answer was spoken
    transcript = "".join(e.delta for e in events if e.type == "response.output_audio_transcript.delta")
    done = next(e for e in events if e.type == "response.done").response
    assert done.status in ("completed", "incomplete")  # incomplete: it reached max_output_tokens
    assert done.output[0].content[0].transcript == transcript


def test_a_function_call_and_its_output(voice: Faces) -> None:
    async def run() -> tuple[list[Any], list[Any]]:
        async with connect(voice, model="gpt-realtime") as connection:
            await until(connection, "session.created")
            session = {
                "type": "realtime",
                "output_modalities": ["text"],
                "tools": [WEATHER],
                "tool_choice": "required",
                "parallel_tool_calls": False,
                "max_output_tokens": 64,
            }
            await connection.session.update(session=session)
            await until(connection, "session.updated")
            content = [{"type": "input_text", "text": QUESTION}]
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": content}
            )
            await connection.response.create()
            first = await until(connection, "response.done")
            call = next(e for e in first if e.type == "response.function_call_arguments.done")
            output = {"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "sunny"}'}
            await connection.conversation.item.create(item=output)
            await connection.response.create(response={"tool_choice": "none"})
            return first, await until(connection, "response.done")

    first, second = asyncio.run(run())
    call = next(e for e in first if e.type == "response.function_call_arguments.done")
    assert call.name == "get_weather"
    assert "city" in json.loads(call.arguments)
    assert "response.function_call_arguments.delta" in kinds(first)
    assert first[-1].response.output[0].type == "function_call"
    assert second[-1].response.output[0].type == "message"
    assert second[-1].response.status in ("completed", "incomplete")


def test_the_next_response_is_taken_as_soon_as_the_last_is_done(voice: Faces) -> None:
    # A client that creates the next response when it reads `response.done` (as after a function call's
    # output) was told, one time in four to six, that the conversation still had an active response: the
    # session let go of a response only once its task had returned, after `response.done` went out.
    async def run() -> list[Any]:
        async with connect(voice, model="gpt-realtime") as connection:
            await until(connection, "session.created")
            session = {"type": "realtime", "output_modalities": ["text"], "max_output_tokens": 4}
            await connection.session.update(session=session)
            await until(connection, "session.updated")
            content = [{"type": "input_text", "text": "Count with me."}]
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": content}
            )
            ends: list[Any] = []
            while len(ends) < 40 and not any(e.type == "error" for e in ends):
                await connection.response.create()
                while (event := SERVER_EVENT.validate_json(await connection.recv_bytes())).type not in (
                    "response.done",
                    "error",
                ):
                    pass
                ends.append(event)
            return ends

    ends = asyncio.run(asyncio.wait_for(run(), 120))
    assert [e.error.code for e in ends if e.type == "error"] == []
    assert {e.response.status for e in ends} <= {"completed", "incomplete"}


def test_a_response_cancelled_mid_answer(voice: Faces) -> None:
    async def run() -> list[Any]:
        async with connect(voice, model="gpt-realtime") as connection:
            await until(connection, "session.created")
            content = [{"type": "input_text", "text": "Tell me a very long story about the sea."}]
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": content}
            )
            await connection.response.create()
            seen = await until(connection, "response.output_audio_transcript.delta")  # as it begins
            await connection.response.cancel()
            return await until(connection, "response.done", seen)

    events = asyncio.run(run())
    done = events[-1].response
    assert done.status == "cancelled"
    assert done.status_details.reason == "client_cancelled"
    assert done.output[0].status == "incomplete"


def test_a_response_cancelled_while_it_waits_for_the_transcript_leaves_it_to_the_next(
    voice: Faces, question: bytes
) -> None:
    """A response asked for before its turn's audio is transcribed waits for the transcript (as on a busy
    machine, where the user speaks again before it comes): cancelled while it waits, the transcript still
    comes, and the next response reads it."""

    async def run() -> tuple[list[Any], Any]:
        async with connect(voice, model="gpt-realtime") as connection:
            await until(connection, "session.created")
            heard = {"transcription": {"model": "whisper-1", "language": "en"}, "turn_detection": None}
            session = {"type": "realtime", "audio": {"input": heard}, "max_output_tokens": 16}
            await connection.session.update(session=session)
            await until(connection, "session.updated")
            # Long enough (~15 s) that it is still being transcribed when the response is cancelled.
            await say(connection, question * 6, 500, 0.0, silence_ms=0)
            await connection.input_audio_buffer.commit()
            await connection.response.create()
            seen = await until(connection, "response.created")
            await connection.response.cancel()
            await until(connection, "response.done", seen)
            await until(connection, "conversation.item.input_audio_transcription.completed", seen)
            await connection.response.create()
            return seen, (await until(connection, "response.done"))[-1]

    events, answered = asyncio.run(run())
    order = kinds(events)
    cancelled = events[order.index("response.done")].response
    assert cancelled.status == "cancelled"
    assert cancelled.status_details.reason == "client_cancelled"
    # Cancelled while it waited, not after the transcript came (what this test is about).
    assert order.index("response.done") < order.index("conversation.item.input_audio_transcription.completed")
    words = len(events[-1].transcript.split())
    assert words >= 3
    assert answered.response.status in ("completed", "incomplete")  # incomplete: max_output_tokens
    assert answered.response.usage.input_tokens > words  # it read the transcript (a token a word at least)


def test_barge_in_cancels_the_answer_and_truncate_cuts_it(voice: Faces, question: bytes) -> None:
    async def run() -> tuple[list[Any], Any, Any]:
        async with connect(voice, model="gpt-realtime") as connection:
            await until(connection, "session.created")
            content = [{"type": "input_text", "text": "Tell me a very long story about the sea."}]
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": content}
            )
            await connection.response.create()
            seen = await until(connection, "response.output_audio.delta")
            item_id = seen[-1].item_id
            await say(connection, question, 100, 0.0, silence_ms=0)  # the user speaks over it
            await until(connection, "response.done", seen)
            await connection.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=300)
            truncated = (await until(connection, "conversation.item.truncated"))[-1]
            await connection.conversation.item.retrieve(item_id=item_id)
            retrieved = (await until(connection, "conversation.item.retrieved"))[-1]
            return seen, truncated, retrieved

    events, truncated, retrieved = asyncio.run(run())
    assert "input_audio_buffer.speech_started" in kinds(events)
    done = events[-1].response
    assert done.status == "cancelled"
    assert done.status_details.reason == "turn_detected"
    assert truncated.audio_end_ms == 300
    full = done.output[0].content[0].transcript
    cut = retrieved.item.content[0].transcript
    assert len(cut.split()) < max(len(full.split()), 2)  # 300 ms is a word or two


def test_a_beta_client_speaks_the_beta_protocol(voice: Faces, question: bytes) -> None:
    # `client.beta.realtime` (the OpenAI-Beta: realtime=v1 header): the beta session shape, events under
    # their beta names (handlers for response.text.delta / response.audio.delta never fired before).
    client = openai.AsyncOpenAI(
        base_url=f"{voice.url}/v1",
        websocket_base_url=voice.url.replace("http", "ws") + "/v1",  # the beta client assumes wss
        api_key="unused",
        max_retries=0,
    )

    async def beta_until(connection: Any, last: str, seen: list[Any]) -> list[Any]:
        while True:
            event = beta_event().validate_json(await asyncio.wait_for(connection.recv_bytes(), 60))
            seen.append(event)
            if event.type == last:
                return seen

    async def run() -> tuple[list[Any], list[Any]]:
        text: list[Any] = []
        spoken: list[Any] = []
        async with client.beta.realtime.connect(model="gpt-4o-realtime-preview") as connection:
            created = (await beta_until(connection, "session.created", text))[-1].session
            assert (created.input_audio_format, created.output_audio_format) == ("pcm16", "pcm16")
            assert created.modalities == ["text", "audio"]
            assert created.turn_detection.type == "server_vad"
            await connection.session.update(
                session={"modalities": ["text"], "max_response_output_tokens": 64, "turn_detection": None}
            )
            updated = (await beta_until(connection, "session.updated", text))[-1].session
            assert (updated.modalities, updated.turn_detection) == (["text"], None)
            said_before = {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": "Hello."}],
            }
            await connection.conversation.item.create(item=said_before)  # beta's assistant part is "text"
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi!"}]}
            )
            await connection.response.create(
                response={"modalities": ["text"], "max_response_output_tokens": 48}
            )
            await beta_until(connection, "response.done", text)
            await connection.session.update(
                session={
                    "modalities": ["text", "audio"],
                    "voice": "alloy",
                    "input_audio_transcription": {"model": "whisper-1"},
                    "turn_detection": {"type": "server_vad"},
                }
            )
            await say(connection, question, 50, 0.0)
            await beta_until(connection, "response.done", spoken)
            return text, spoken

    text, spoken = asyncio.run(run())
    order = kinds(text)
    assert [e.item.content[0].type for e in text if e.type == "conversation.item.created"][:2] == [
        "text",
        "input_text",
    ]
    assert not [e for e in text if e.type == "error"]
    assert order.index("response.created") < order.index("response.text.delta") < order.index("response.done")
    written = "".join(e.delta for e in text if e.type == "response.text.delta")
    done = text[-1].response
    assert done.modalities == ["text"]
    assert done.max_output_tokens == 48
    assert done.output[0].content[0].type == "text"
    assert done.output[0].content[0].text == written
    order = kinds(spoken)
    for kind in ("input_audio_buffer.committed", "response.audio.delta", "response.audio_transcript.delta"):
        assert kind in order
    audio = b"".join(base64.b64decode(e.delta) for e in spoken if e.type == "response.audio.delta")
    assert len(audio) / 2 / RATE > 0.5
    said = "".join(e.delta for e in spoken if e.type == "response.audio_transcript.delta")
    assert spoken[-1].response.output[0].content[0].type == "audio"
    assert spoken[-1].response.output[0].content[0].transcript == said
    # Nothing under a GA name reaches a beta client.
    ga_only = {"conversation.item.added", "conversation.item.done", "response.output_text.delta"}
    assert not ga_only & set(kinds(text) + kinds(spoken))


def test_a_transcription_session(voice: Faces, question: bytes) -> None:
    async def run() -> list[Any]:
        async with connect(voice, extra_query={"intent": "transcription"}) as connection:
            created = await until(connection, "session.created")
            assert created[0].session.type == "transcription"
            await say(connection, question, 50, 0.0)
            events = await until(connection, "conversation.item.input_audio_transcription.completed")
            await connection.response.create()
            return await until(connection, "error", events)

    events = asyncio.run(run())
    heard = next(e for e in events if e.type == "conversation.item.input_audio_transcription.completed")
    assert word_error_rate(QUESTION, heard.transcript) <= 0.25
    assert "response.created" not in kinds(events)
    assert events[-1].error.code == "unsupported_event"  # no responses in a transcription session


def test_a_session_sent_back_as_it_was_shown_keeps_what_the_server_says_of_it(voice: Faces) -> None:
    """A client may send back the session it was shown (its id, object and expiry among the fields): they
    are the server's, not settings; once, an expiry of another type made a client secret's mint a 500."""
    client = openai.OpenAI(base_url=f"{voice.url}/v1", api_key="unused", max_retries=0)
    echoed = {"id": "sess_mine", "object": "realtime.session", "expires_at": {"x": {}}, "client_secret": None}
    made = client.realtime.client_secrets.create(session={"type": "realtime", **echoed})  # type: ignore[typeddict-unknown-key]
    assert made.session.id != "sess_mine"
    assert made.session.id.startswith("sess_")

    async def run() -> tuple[Any, Any]:
        async with connect(voice) as connection:
            created = (await until(connection, "session.created"))[-1].session
            shown = created.model_dump(mode="json", exclude_unset=True)
            await connection.session.update(session={**shown, "instructions": "Be brief."})
            return created, (await until(connection, "session.updated"))[-1].session

    created, updated = asyncio.run(run())
    assert updated.instructions == "Be brief."
    assert (updated.id, updated.object) == (created.id, "realtime.session")
    assert updated.expires_at >= created.expires_at - 1


def test_a_beta_transcription_session_is_updated_under_its_beta_name(voice: Faces) -> None:
    """A browser of the beta protocol (its subprotocol) updating a transcription session: the beta event
    names it, and its session has the beta transcription session's shape (no client secret: none opened
    this socket, which is why it is the one beta event not checked against its class)."""
    import websockets

    url = voice.url.replace("http", "ws") + "/v1/realtime?intent=transcription"

    async def run() -> dict[str, Any]:
        async with websockets.connect(url, subprotocols=["realtime", "openai-beta.realtime-v1"]) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
            update = {"input_audio_transcription": {"model": "whisper-1"}, "turn_detection": None}
            await ws.send(json.dumps({"type": "transcription_session.update", "session": update}))
            updated: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 30))
            return updated

    updated = asyncio.run(run())
    assert updated["type"] == "transcription_session.updated", updated
    session = updated["session"]
    assert session["object"] == "realtime.transcription_session"
    assert session["modalities"] == ["text"]
    assert session["input_audio_format"] == "pcm16"
    assert session["turn_detection"] is None
    assert session["input_audio_transcription"]["model"] == "whisper-1"
    assert "client_secret" not in session


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("not json", "invalid_json"),
        ('{"type": "no.such.event"}', "invalid_value"),
        ('{"type": "input_audio_buffer.append", "audio": "%%%"}', "invalid_value"),
        ('{"type": "input_audio_buffer.append", "audio": "AAAA"}', "invalid_value"),
        (
            '{"type": "session.update", "session": {"audio": {"input": {"format": {"type": "audio/flac"}}}}}',
            "invalid_value",
        ),
        ('{"type": "input_audio_buffer.commit"}', "input_audio_buffer_commit_empty"),
        ('{"type": "response.cancel"}', "response_cancel_not_active"),
        ('{"type": "conversation.item.delete", "item_id": "item_nope"}', "item_not_found"),
        (
            '{"type": "conversation.item.create", "item": {"type": "message", "role": "wizard"}}',
            "invalid_value",
        ),
        ('{"type": "session.update", "session": {"type": "transcription"}}', "invalid_value"),
        # A tool's schema 200 levels deep: past the nesting every request is held to.
        (
            '{"type": "session.update", "session": {"type": "realtime", "tools": [{"type": "function", '
            '"name": "f", "parameters": ' + '{"a": ' * 200 + "1" + "}" * 200 + "}]}}",
            "invalid_value",
        ),
    ],
)
def test_bad_client_events_get_error_events_and_the_session_goes_on(
    voice: Faces, message: str, code: str
) -> None:
    async def run() -> tuple[Any, list[Any]]:
        async with connect(voice) as connection:
            await until(connection, "session.created")
            await connection._connection.send(message)  # as it is: the SDK would check it first
            error = (await until(connection, "error"))[-1]
            await connection.session.update(session={"type": "realtime", "instructions": "Be brief."})
            return error, await until(connection, "session.updated")

    error, after = asyncio.run(run())
    assert error.error.code == code
    assert after[-1].session.instructions == "Be brief."


def test_every_client_event_of_the_sdk_has_its_handler(voice: Faces) -> None:
    """A client event the openai package defines and no handler serves would pass validation and then fail:
    the session's table is keyed by the very classes the events are read through."""

    async def sent(event: Any) -> None:
        pass

    async def run() -> set[type[Any]]:
        session = await voice.service.realtime.open(None, None, sent)
        try:
            return set(session.handlers)
        finally:
            await session.close()

    union = typing.get_args(typing.get_args(RealtimeClientEvent)[0])  # Annotated[Union[...], discriminator]
    assert union
    assert asyncio.run(run()) == set(union)


def test_an_oversized_message_is_an_error_event(voice: Faces) -> None:
    limit = voice.service.settings.limits.realtime_message_bytes

    async def run() -> Any:
        async with connect(voice, websocket_connection_options={"max_size": None}) as connection:
            await until(connection, "session.created")
            big = json.dumps({"type": "input_audio_buffer.append", "audio": "A" * (limit + 4)})
            await connection._connection.send(big)
            return (await until(connection, "error"))[-1]

    assert asyncio.run(run()).error.code == "message_too_large"


def test_a_client_that_vanishes_mid_answer_frees_the_pipeline(voice: Faces) -> None:
    async def leave() -> None:
        async with connect(voice) as connection:
            await until(connection, "session.created")
            content = [{"type": "input_text", "text": "Tell me a very long story about the sea."}]
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": content}
            )
            await connection.response.create()
            await until(connection, "response.output_audio_transcript.delta")
        # gone, mid-answer

    asyncio.run(leave())
    started = time.monotonic()
    answer = voice.http.chat.completions.create(
        model=DEFAULT_CHAT, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    assert answer.choices[0].message.content is not None
    assert time.monotonic() - started < 10 * slack()
    loaded = voice.service.manager.loaded(DEFAULT_CHAT)
    assert loaded is not None
    deadline = time.monotonic() + 5
    while not loaded.slots.idle and time.monotonic() < deadline:
        time.sleep(0.05)
    assert loaded.slots.idle


def test_an_unknown_pipeline_is_refused(voice: Faces) -> None:
    async def run() -> Any:
        async with connect(voice, model="no-such-pipeline") as connection:
            return (await until(connection, "error"))[-1]

    assert asyncio.run(run()).error.code == "model_not_found"


def test_keys_are_asked_for_and_taken_as_a_subprotocol(question: bytes) -> None:
    import websockets

    models = [
        ModelConfig(id=DEFAULT_TRANSCRIPTION, engine="faster-whisper"),
        ModelConfig(id=DEFAULT_REALTIME, engine="realtime"),
    ]
    with faces(Settings(defaults=False, models=models, api_keys=["sesame"]), api_key="sesame") as served:
        url = served.url.replace("http", "ws") + "/v1/realtime?intent=transcription"

        async def run() -> tuple[Any, Any]:
            with pytest.raises(websockets.InvalidStatus) as refused:
                async with websockets.connect(url):
                    pass
            async with websockets.connect(
                url, subprotocols=["realtime", "openai-insecure-api-key.sesame"]
            ) as ws:
                return refused.value, json.loads(await ws.recv())

        refused, created = asyncio.run(run())
    assert refused.response.status_code == 403
    assert created["type"] == "session.created"


def test_a_revoked_key_ends_its_open_session(tmp_path: Path) -> None:
    import websockets

    from tests.server.test_projects import closes_on_revocation, revocable_key

    database = str(tmp_path / "state.db")
    key_id, key = revocable_key(database, "voice")
    settings = listening_settings(database, key_cache_seconds=0.5)
    with faces(settings, api_key=key) as served:
        url = served.url.replace("http", "ws") + "/v1/realtime?intent=transcription"

        async def run() -> None:
            async with websockets.connect(
                url, subprotocols=["realtime", f"openai-insecure-api-key.{key}"]
            ) as ws:
                assert json.loads(await ws.recv())["type"] == "session.created"
                await closes_on_revocation(ws, key_id, database, "the realtime WebSocket")

        asyncio.run(run())


def test_the_agents_sdk_runs_a_realtime_agent_with_a_function_tool(voice: Faces) -> None:
    from agents import function_tool
    from agents.realtime import RealtimeAgent, RealtimeRunner

    asked: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        asked.append(city)
        return f"It is sunny in {city}."

    agent = RealtimeAgent(name="Forecaster", instructions="Use get_weather to answer.", tools=[get_weather])
    # One call per response: parallel calls from this small model may run on to the 4,096-token limit.
    settings = {
        "model_name": "gpt-realtime",
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "output_modalities": ["text"],
    }
    runner = RealtimeRunner(agent, config={"model_settings": settings, "tracing_disabled": True})
    url = voice.url.replace("http", "ws") + "/v1/realtime?model=gpt-realtime"

    async def run() -> list[Any]:
        seen: list[Any] = []
        session = await runner.run(model_config={"url": url, "api_key": "unused"})
        async with session:
            await session.send_message(QUESTION)
            async for event in session:
                seen.append(event)
                if event.type in ("tool_end", "error") or len(seen) > 500:
                    break
        return seen

    events = asyncio.run(run())
    assert [e for e in events if e.type == "error"] == []
    ended = next((e for e in events if e.type == "tool_end"), None)
    assert ended, f"no tool_end among {[e.type for e in events]}"
    assert ended.output.startswith("It is sunny in")
    assert asked


def test_the_agents_sdk_speech_to_text_model_transcribes_through_modelport(
    voice: Faces, question: bytes
) -> None:
    from agents.voice import OpenAISTTModel, StreamedAudioInput, STTModelSettings

    client = openai.AsyncOpenAI(base_url=f"{voice.url}/v1", api_key="unused")
    model = OpenAISTTModel("gpt-4o-transcribe", openai_client=client)

    async def run() -> list[str]:
        audio = StreamedAudioInput()
        session = await model.create_session(audio, STTModelSettings(), False, False)
        samples = np.frombuffer(question + bytes(RATE * 2), np.int16)
        for at in range(0, len(samples), RATE // 10):
            await audio.add_audio(samples[at : at + RATE // 10])
        await audio.add_audio(None)
        turns = [turn async for turn in session.transcribe_turns()]
        await session.close()
        return turns

    turns = asyncio.run(run())
    assert word_error_rate(QUESTION, " ".join(turns)) <= 0.25


def test_the_pipeline_is_listed_as_a_model(voice: Faces) -> None:
    listed = {m.id: m for m in voice.http.models.list()}
    pipeline = voice.http.models.retrieve("realtime")
    assert listed["realtime"].capabilities == ["realtime"]  # type: ignore[attr-defined]
    assert pipeline.pipeline["chat"] == DEFAULT_CHAT  # type: ignore[attr-defined]


def test_an_idle_user_is_prompted_after_idle_timeout_ms(voice: Faces) -> None:
    async def run() -> list[Any]:
        async with connect(voice) as connection:
            await until(connection, "session.created")
            detection = {"type": "server_vad", "idle_timeout_ms": 300}
            session = {"type": "realtime", "output_modalities": ["text"], "max_output_tokens": 16}
            await connection.session.update(
                session={**session, "audio": {"input": {"turn_detection": detection}}}
            )
            content = [{"type": "input_text", "text": "Say hello."}]
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": content}
            )
            await connection.response.create()
            seen = await until(connection, "response.done")
            await until(connection, "input_audio_buffer.timeout_triggered", seen)
            return await until(connection, "response.done", seen)

    events = asyncio.run(run())
    assert kinds(events).count("response.done") == 2


def test_an_out_of_band_response_reads_only_its_input_and_stays_out_of_the_conversation(voice: Faces) -> None:
    async def run() -> list[Any]:
        async with connect(voice) as connection:
            await until(connection, "session.created")
            content = [{"type": "input_text", "text": "My name is Ada."}]
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": content}
            )
            await until(connection, "conversation.item.done")
            asked = [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say yes."}]}
            ]
            response = {
                "conversation": "none",
                "input": asked,
                "output_modalities": ["text"],
                "max_output_tokens": 8,
            }
            await connection.response.create(response={**response, "metadata": {"purpose": "check"}})
            return await until(connection, "response.done")

    events = asyncio.run(run())
    assert "conversation.item.added" not in kinds(events)
    done = events[-1].response
    assert done.conversation_id is None
    assert done.metadata == {"purpose": "check"}
    assert done.usage.input_tokens < 40  # the instructions and "Say yes.", not the conversation's ~50 tokens


def g711(pcm: bytes, codec: Literal["pcm_mulaw", "pcm_alaw"]) -> bytes:
    """24 kHz 16-bit PCM as 8 kHz G.711."""
    frame = av.AudioFrame.from_ndarray(
        np.frombuffer(pcm, np.int16).reshape(1, -1), format="s16", layout="mono"
    )
    frame.sample_rate = RATE
    resampler = av.AudioResampler("s16", "mono", 8000)
    encoder = av.CodecContext.create(codec, "w")
    encoder.sample_rate, encoder.layout, encoder.format = 8000, "mono", "s16"
    frames = [*resampler.resample(frame), *resampler.resample(None)]
    return b"".join(bytes(p) for f in frames for p in encoder.encode(f))


def test_g711_in_and_out(voice: Faces, question: bytes) -> None:
    async def run() -> tuple[list[Any], list[Any]]:
        async with connect(voice) as connection:
            await until(connection, "session.created")
            audio = {
                "input": {"format": {"type": "audio/pcmu"}, "transcription": {"model": "whisper-1"}},
                "output": {"format": {"type": "audio/pcma"}},
            }
            await connection.session.update(
                session={"type": "realtime", "audio": audio, "max_output_tokens": 32}
            )
            await until(connection, "session.updated")
            law = g711(question + bytes(RATE * 2), "pcm_mulaw")
            for at in range(0, len(law), 800):  # 100 ms pieces
                await connection.input_audio_buffer.append(
                    audio=base64.b64encode(law[at : at + 800]).decode()
                )
            heard = await until(connection, "conversation.item.input_audio_transcription.completed")
            return heard, await until(connection, "response.done")

    heard, answer = asyncio.run(run())
    assert word_error_rate(QUESTION, heard[-1].transcript) <= 0.25
    spoken = b"".join(base64.b64decode(e.delta) for e in answer if e.type == "response.output_audio.delta")
    assert len(spoken) / 8000 > 0.5  # one byte a sample at 8 kHz


def test_in_process_text_and_audio_turns(voice: Faces, question: bytes) -> None:
    """`realtime.connect()` on the in-process client: the same connection class and events, no socket."""

    def until_sync(connection: Any, last: str) -> list[Any]:
        events = []
        while True:
            event = SERVER_EVENT.validate_json(connection.recv_bytes())
            events.append(event)
            if event.type == last:
                return events

    with voice.inprocess.realtime.connect(model="gpt-realtime") as connection:
        assert until_sync(connection, "session.created")[-1].session.type == "realtime"
        connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        until_sync(connection, "session.updated")
        connection.conversation.item.create(
            item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hi."}]}
        )
        connection.response.create(response={"max_output_tokens": 32})
        text_turn = until_sync(connection, "response.done")
        transcription = {"model": "whisper-1", "language": "en"}
        session = {
            "type": "realtime",
            "output_modalities": ["audio"],
            "audio": {"input": {"transcription": transcription}},
            "max_output_tokens": 48,
        }
        connection.session.update(session=session)
        until_sync(connection, "session.updated")
        audio = question + bytes(RATE * 2 * 1200 // 1000)
        step = RATE * 2 // 10
        for at in range(0, len(audio), step):
            connection.input_audio_buffer.append(audio=base64.b64encode(audio[at : at + step]).decode())
        audio_turn = until_sync(connection, "response.done")
        if "conversation.item.input_audio_transcription.completed" not in kinds(audio_turn):
            audio_turn += until_sync(connection, "conversation.item.input_audio_transcription.completed")
    said = "".join(e.delta for e in text_turn if e.type == "response.output_text.delta")
    assert said.strip()
    assert text_turn[-1].response.output[0].content[0].text == said
    heard = next(e for e in audio_turn if e.type == "conversation.item.input_audio_transcription.completed")
    assert word_error_rate(QUESTION, heard.transcript) <= 0.25
    spoken = b"".join(
        base64.b64decode(e.delta) for e in audio_turn if e.type == "response.output_audio.delta"
    )
    assert len(spoken) / 2 / RATE > 0.5


def test_a_flood_of_items_is_capped_and_the_server_stays_responsive(voice: Faces) -> None:
    # 10,000 items with ids of the client's once made /health take 37 s: each id was looked for item by item.
    limits = voice.service.settings.limits
    cap, sent = 300, 3000
    kept = limits.realtime_items
    limits.realtime_items = cap

    async def run() -> list[Any]:
        async with connect(voice) as connection:
            await until(connection, "session.created")
            for i in range(sent):
                item = {"id": f"item_{i}", "type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": "x" * 200}]}  # fmt: skip
                await connection._connection.send(
                    json.dumps({"type": "conversation.item.create", "item": item})
                )
            await connection._connection.send(
                json.dumps({"type": "conversation.item.retrieve", "item_id": "item_0"})
            )
            return await until(connection, "conversation.item.retrieved")

    try:
        with health_probed(voice.url) as waits:
            events = asyncio.run(run())
    finally:
        limits.realtime_items = kept
    full = [e for e in events if e.type == "error" and e.error.code == "conversation_full"]
    assert len([e for e in events if e.type == "conversation.item.added"]) == cap
    assert len(full) == sent - cap
    assert full[0].error.param == "item"
    assert waits
    assert sorted(waits)[len(waits) // 2] < 0.1 * slack()  # the median: the loop is never held by the flood


@pytest.mark.parametrize("fmt", ["audio/pcm", "audio/pcma"])
def test_a_clause_spoken_as_nothing_leaves_the_answer_whole(fmt: str) -> None:
    # Piper makes no samples of "...": the answer's other clauses are still spoken and the response completes
    # (an empty piece failed in FFmpeg's resampler and ended the answer). The chat model says the user's
    # words back reversed, so the clause is the test's, not a model's.
    models = [
        ModelConfig(id="reverse", predictor="tests.predictors.tiny_models:reverse_chat"),
        *(m for m in VOICE_MODELS if m.id not in (DEFAULT_CHAT, DEFAULT_REALTIME)),  # speech, transcription
        ModelConfig.model_validate({"id": "echo-voice", "engine": "realtime", "chat": "reverse"}),
    ]

    async def run(served: Faces) -> list[Any]:
        async with connect(served, model="echo-voice") as connection:
            await until(connection, "session.created")
            audio = {"output": {"format": {"type": fmt}}}
            await connection.session.update(session={"type": "realtime", "audio": audio})
            await until(connection, "session.updated")
            content = [{"type": "input_text", "text": "Fine. ... Fine."}]
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": content}
            )
            await connection.response.create()
            return await until(connection, "response.done")

    with faces(Settings(defaults=False, models=models)) as served:
        events = asyncio.run(run(served))
    assert events[-1].response.status == "completed"
    assert "error" not in kinds(events)
    spoken = b"".join(base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta")
    seconds = len(spoken) / (RATE * 2 if fmt == "audio/pcm" else 8000)
    assert seconds > 0.5
