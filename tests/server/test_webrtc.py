"""Realtime over WebRTC with client secrets, as a browser app does it (its backend mints a client secret, the
page posts its SDP offer with it), with aiortc as the browser: speech goes in as Opus over RTP and the
answer comes back the same way (transcribed back by Whisper), events over the `oai-events` data channel
(each validated against the openai package's types), barge-in, a function call, hang-up; and the keys:
an expired secret, a secret on any other route, another project's call."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import av
import httpx
import numpy as np
import openai
import pytest
from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamError

from modelport.service.access import client_secrets
from modelport.settings import (
    DEFAULT_SPEECH,
)
from tests.server.conftest import QUESTION, listening_settings
from tests.server.test_realtime import SERVER_EVENT, WEATHER
from tests.service.test_audio import word_error_rate
from tests.support.faces import Faces, faces
from tests.support.machine_load import slack
from tests.support.microphone import RATE, Microphone

pytestmark = pytest.mark.models  # real models: not the unit tier


class Browser:
    """One call as a page makes it: its microphone, the events it got, the audio it heard (24 kHz)."""

    def __init__(self) -> None:
        self.peer = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.microphone = Microphone()
        self.peer.addTrack(self.microphone)
        self.channel = self.peer.createDataChannel("oai-events")
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.seen: list[Any] = []
        self.heard: list[np.ndarray] = []
        self.channel.on("message", lambda text: self.events.put_nowait(SERVER_EVENT.validate_json(text)))
        self.peer.on("track", self._track)
        self.tasks: list[asyncio.Task[None]] = []

    def _track(self, track: MediaStreamTrack) -> None:
        async def listen() -> None:
            resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
            while True:
                try:
                    frame = await track.recv()
                except MediaStreamError:
                    return
                self.heard += [f.to_ndarray().reshape(-1) for f in resampler.resample(frame)]

        self.tasks.append(asyncio.ensure_future(listen()))

    async def offer(self) -> str:
        await self.peer.setLocalDescription(await self.peer.createOffer())
        return self.peer.localDescription.sdp

    async def until(self, last: str) -> list[Any]:
        """The events up to and including the next `last`."""
        events = []
        while True:
            event = await asyncio.wait_for(self.events.get(), 60)
            self.seen.append(event)
            events.append(event)
            if event.type == last:
                return events

    def send(self, event: dict[str, Any]) -> None:
        self.channel.send(json.dumps(event))

    def heard_pcm(self) -> bytes:
        return np.concatenate(self.heard).astype("<i2").tobytes() if self.heard else b""

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await self.peer.close()


@asynccontextmanager
async def call(served: Faces, key: str, **create: Any) -> AsyncIterator[tuple[Browser, str]]:
    """A call made with `key` through the openai SDK's `realtime.calls.create`: the browser, the call id."""
    browser = Browser()
    client = openai.AsyncOpenAI(base_url=f"{served.url}/v1", api_key=key, max_retries=0)
    answer = await client.realtime.calls.with_raw_response.create(sdp=await browser.offer(), **create)
    assert answer.http_response.status_code == 201
    assert answer.headers["content-type"].startswith("application/sdp")
    call_id = answer.headers["location"].rsplit("/", 1)[-1]
    await browser.peer.setRemoteDescription(RTCSessionDescription(answer.http_response.text, "answer"))
    try:
        yield browser, call_id
    finally:
        await browser.close()


def mint(served: Faces, key: str = "unused", **session: Any) -> str:
    client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=key, max_retries=0)
    made = client.realtime.client_secrets.create(session={"type": "realtime", **session})
    assert made.value.startswith("ek_")
    assert made.expires_at > time.time() + 500
    return made.value


# How far the speech heard over a call may be from the same text spoken by the server's speech endpoint, in
# voiced seconds (relative): the transport is what is tested, so whatever the model said (in whatever
# language: Whisper's hearing of a French answer spoken by the English voice is a different guess each time)
# is measured against itself. Clause-by-clause synthesis and Opus move it a little; half an answer, another
# answer or silence move it far.
HEARD_AS_SAID = 0.25
# Voiced: louder than a hundredth of the loudest 20 ms (-40 dB). Piper scales each text it is given to full
# loudness, so an answer spoken clause by clause is louder in its quiet stretches than the same text spoken
# whole: at a tenth, one answer's clauses were 5.7 voiced seconds against 4.3 whole (a third apart, by the
# words alone); at a hundredth the stretches between words and clauses are what is left out, 0-10% apart.
VOICED = 0.01


def voiced_seconds(pcm: bytes) -> float:
    """Seconds of 16-bit PCM at 24 kHz whose 20-ms frames are louder than VOICED of its loudest."""
    samples = np.frombuffer(pcm, "<i2").astype(np.float32)
    frames = samples[: len(samples) // 480 * 480].reshape(-1, 480)
    loudness = np.sqrt((frames**2).mean(axis=1))
    return float((loudness > VOICED * loudness.max()).sum() * 0.02) if len(frames) else 0.0


def heard_unlike_said(served: Faces, said: str, heard: bytes, voice: str = "alloy") -> float:
    """How far the voiced length of what was heard over the call is from that of `said` spoken by the
    server's speech endpoint in the session's voice: relative to it, or to 1.2 s for a short answer (a
    one-word answer is 0.4 s voiced, and the recorder's edges move a tenth of a second or two either way;
    losing that word still shows)."""
    spoken = served.inprocess.audio.speech.create(
        model=DEFAULT_SPEECH, voice=voice, input=said, response_format="pcm"
    ).content
    expected = voiced_seconds(spoken)
    return abs(voiced_seconds(heard) - expected) / max(expected, 1.2)


def test_a_call_with_a_client_secret_hears_the_question_and_speaks_the_answer(
    voice: Faces, question: bytes
) -> None:
    secret = mint(
        voice,
        instructions="Answer in English, in one short sentence.",
        max_output_tokens=40,
        audio={"input": {"transcription": {"model": "whisper-1", "language": "en"}}},
    )

    async def run() -> tuple[list[Any], bytes]:
        async with call(voice, secret) as (browser, _):
            created = (await browser.until("session.created"))[-1]
            # the secret's session
            assert created.session.instructions == "Answer in English, in one short sentence."
            browser.microphone.say(question)
            events = await browser.until("response.done")
            events += await browser.until("output_audio_buffer.stopped")
            return events, browser.heard_pcm()

    events, heard = asyncio.run(run())
    kinds = [e.type for e in events]
    for kind in (
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "conversation.item.input_audio_transcription.completed",
        "output_audio_buffer.started",
    ):
        assert kind in kinds
    assert "response.output_audio.delta" not in kinds  # the audio came over RTP
    asked = next(e for e in events if e.type == "conversation.item.input_audio_transcription.completed")
    assert word_error_rate(QUESTION, asked.transcript) <= 0.25, asked.transcript
    said = next(e for e in events if e.type == "response.done").response.output[0].content[0].transcript
    assert said.strip()
    spoken = np.frombuffer(heard, "<i2")
    assert np.abs(spoken).max() > 1000  # not silence
    gap = heard_unlike_said(voice, said, heard)
    assert gap <= HEARD_AS_SAID, (gap, said)


def test_speaking_over_the_answer_stops_its_audio_and_cuts_it_where_it_was_heard(
    voice: Faces, question: bytes
) -> None:
    async def run() -> list[Any]:
        async with call(voice, "unused") as (browser, _):
            await browser.until("session.created")
            browser.send(
                {
                    "type": "conversation.item.create",
                    "item": {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "Tell me a long story about a dragon."}],
                    },
                }
            )
            browser.send({"type": "response.create", "response": {"max_output_tokens": 200}})
            events = await browser.until("output_audio_buffer.started")
            await asyncio.sleep(1.0)
            browser.microphone.say(question)
            events += await browser.until("output_audio_buffer.cleared")
            if not any(e.type == "conversation.item.truncated" for e in events):  # it may come first or after
                events += await browser.until("conversation.item.truncated")
            return events

    events = asyncio.run(run())
    kinds = [e.type for e in events]
    assert "input_audio_buffer.speech_started" in kinds
    cleared = next(e for e in events if e.type == "output_audio_buffer.cleared")
    # Cut where it was heard (a second before the user spoke), whether or not the next clause's speech was
    # made yet when they did.
    truncated = [e for e in events if e.type == "conversation.item.truncated"]
    assert len(truncated) == 1
    assert truncated[0].audio_end_ms >= 500
    started = next(e for e in events if e.type == "output_audio_buffer.started")
    assert cleared.response_id == started.response_id


def test_a_function_call_over_the_data_channel(voice: Faces) -> None:
    async def run() -> list[Any]:
        async with call(voice, "unused", session={"type": "realtime", "tools": [WEATHER]}) as (browser, _):
            await browser.until("session.created")
            browser.send(
                {
                    "type": "conversation.item.create",
                    "item": {
                        "type": "function_call_output",
                        "call_id": "call_1",
                        "output": '{"city": "Paris", "weather": "sunny, 21 C"}',
                    },
                }
            )
            browser.send(
                {
                    "type": "response.create",
                    "response": {"output_modalities": ["text"], "tool_choice": "required"},
                }
            )
            return await browser.until("response.done")

    events = asyncio.run(run())
    done = events[-1].response
    assert done.output[0].type == "function_call"
    assert done.output[0].name == "get_weather"


def test_hangup_ends_the_call_and_sip_actions_are_refused(voice: Faces) -> None:
    async def run() -> tuple[int, int, int, str]:
        async with call(voice, "unused") as (browser, call_id):
            await browser.until("session.created")
            async with httpx.AsyncClient(base_url=f"{voice.url}/v1") as http:
                refused = await http.post(f"/realtime/calls/{call_id}/accept", json={"type": "realtime"})
                unknown = await http.post("/realtime/calls/rtc_nope/hangup")
                hung = await http.post(f"/realtime/calls/{call_id}/hangup")
            for _ in range(50):
                if browser.peer.connectionState == "closed":
                    break
                await asyncio.sleep(0.1)
            return refused.status_code, unknown.status_code, hung.status_code, browser.peer.connectionState

    refused, unknown, hung, state = asyncio.run(run())
    assert (refused, unknown, hung) == (400, 404, 200)
    assert state == "closed"
    # Every call these tests made has ended, and the server holds none of them (past `max_calls` held,
    # it would refuse new ones).
    calls = voice.app.state.service.realtime.calls
    for _ in range(50):
        if not calls.ids():
            break
        time.sleep(0.1)
    assert calls.ids() == []
    sdp = {"Content-Type": "application/sdp"}
    for offer in ("v=0\r\n", "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF x\r\na=rtpmap:nonsense\r\n", ""):
        answer = httpx.post(f"{voice.url}/v1/realtime/calls", content=offer, headers=sdp)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["param"] == "sdp"


def test_client_secrets_open_realtime_only_until_they_expire_and_only_for_their_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.server.test_projects import cli, made_key

    database = str(tmp_path / "state.db")
    cli("projects", "create", "one", "--database", database)
    cli("projects", "create", "two", "--database", database)
    _, one = made_key(database, "one")
    _, two = made_key(database, "two")
    settings = listening_settings(database, key_cache_seconds=0)
    with faces(settings, api_key=one) as served:
        secret = mint(served, one, **{"type": "transcription"})
        as_key = openai.OpenAI(base_url=f"{served.url}/v1", api_key=secret, max_retries=0)
        with pytest.raises(openai.PermissionDeniedError):
            as_key.models.list()
        with pytest.raises(openai.PermissionDeniedError):
            as_key.realtime.client_secrets.create(session={"type": "realtime"})
        nobody = httpx.post(
            f"{served.url}/v1/realtime/calls", content="v=0", headers={"content-type": "application/sdp"}
        )
        assert nobody.status_code == 401

        async def run() -> tuple[str, int]:
            async with call(served, secret) as (browser, call_id):
                created = (await browser.until("session.created"))[-1]
                async with httpx.AsyncClient(base_url=f"{served.url}/v1") as http:
                    other = await http.post(
                        f"/realtime/calls/{call_id}/hangup", headers={"Authorization": f"Bearer {two}"}
                    )
                return created.session.type, other.status_code

        kind, other = asyncio.run(run())
        assert kind == "transcription"  # the session the secret was minted with
        assert other == 404  # another project's key cannot reach the call

        later = time.time() + 601
        monkeypatch.setattr(client_secrets, "time", SimpleNamespace(time=lambda: later))
        with pytest.raises(openai.AuthenticationError, match="expired"):
            asyncio.run(_offer_only(served, secret))


async def _offer_only(served: Faces, key: str) -> None:
    async with call(served, key):
        pass


def test_offers_sent_together_are_held_to_max_calls(voice: Faces) -> None:
    # Counted before its awaits and registered after them, 8 offers sent together all got in past 3.
    settings = voice.service.settings.webrtc
    kept, settings.max_calls = settings.max_calls, 3

    async def run() -> list[int]:
        browsers = [Browser() for _ in range(8)]
        offers = [await browser.offer() for browser in browsers]
        sdp = {"Content-Type": "application/sdp"}
        async with httpx.AsyncClient(base_url=f"{voice.url}/v1", timeout=60) as http:
            answers = await asyncio.gather(
                *(http.post("/realtime/calls", content=o, headers=sdp) for o in offers)
            )
            for answer in answers:
                if answer.status_code == 201:
                    await http.post(f"{answer.headers['location'].removeprefix('/v1')}/hangup")
        for browser in browsers:
            await browser.close()
        return [answer.status_code for answer in answers]

    try:
        statuses = asyncio.run(run())
    finally:
        settings.max_calls = kept
    assert sorted(statuses) == [201] * 3 + [429] * 5


def test_client_secret_mints_count_against_the_project_s_rate_and_bound_instructions(tmp_path: Path) -> None:
    # A 1-rpm project once minted 30, one of them with 5 MB of instructions kept in the store.
    from tests.server.test_projects import cli, made_key

    database = str(tmp_path / "state.db")
    cli("projects", "create", "slow", "--database", database, "--rpm", "1")
    _, key = made_key(database, "slow")
    settings = listening_settings(database)
    with faces(settings, api_key=key) as served:
        client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=key, max_retries=0)
        too_long = "x" * (settings.limits.input_chars + 1)
        with pytest.raises(openai.BadRequestError) as caught:
            client.realtime.client_secrets.create(session={"type": "realtime", "instructions": too_long})
        assert caught.value.body["param"] == "session.instructions"
        client.realtime.client_secrets.create(session={"type": "transcription"})
        with pytest.raises(openai.RateLimitError):
            client.realtime.client_secrets.create(session={"type": "transcription"})


def test_a_revoked_key_ends_its_call(tmp_path: Path) -> None:
    # The same watcher as the WebSockets': the call says why on its data channel, then hangs up.
    from tests.server.test_projects import closed_within, revocable_key, revoke

    database = str(tmp_path / "state.db")
    key_id, key = revocable_key(database, "calls")
    settings = listening_settings(database, key_cache_seconds=0.5)
    with faces(settings, api_key=key) as served:

        async def run() -> tuple[Any, str, float]:
            async with call(served, key, session={"type": "transcription"}) as (browser, _):
                await browser.until("session.created")
                revoked = await revoke(key_id, database)
                error = (await browser.until("error"))[-1]
                for _ in range(100):
                    if browser.peer.connectionState == "closed":
                        break
                    await asyncio.sleep(0.05)
                return error, browser.peer.connectionState, revoked

        error, state, revoked = asyncio.run(run())
        closed_within(revoked, "a WebRTC call")
        assert error.error.code == "invalid_api_key"
        assert state == "closed"
        assert served.app.state.service.realtime.calls.ids() == []


def test_a_client_that_leaves_mid_offer_is_a_499_not_a_500(voice: Faces) -> None:
    host, port = voice.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as raw:
        raw.sendall(
            b"POST /v1/realtime/calls HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sdp\r\n"
            b"Content-Length: 5000\r\n\r\nv=0\r\n"
        )
    route = 'method="POST",route="/v1/realtime/calls"'  # the offer's route template
    for _ in range(50):
        counted = [line for line in httpx.get(f"{voice.url}/metrics").text.splitlines()
                   if line.startswith("modelport_requests_total") and route in line]  # fmt: skip
        if any('status="499"' in line for line in counted):
            break
        time.sleep(0.1)
    assert any('status="499"' in line for line in counted), counted
    assert not any('status="500"' in line for line in counted)


def test_a_call_whose_client_never_connects_is_freed(voice: Faces) -> None:
    # A client that never completed ICE held its place for 66-90 s.
    settings = voice.service.settings.webrtc
    kept, settings.connect_seconds = settings.connect_seconds, 1.0

    async def offer() -> httpx.Response:
        browser = Browser()  # it never takes the answer: it never connects
        sdp = {"Content-Type": "application/sdp"}
        async with httpx.AsyncClient(base_url=f"{voice.url}/v1", timeout=60) as http:
            answer = await http.post("/realtime/calls", content=await browser.offer(), headers=sdp)
        await browser.close()
        return answer

    try:
        answer = asyncio.run(offer())
        start, status = time.monotonic(), answer.status_code
        call_id = answer.headers["location"].rsplit("/", 1)[-1]
        for _ in range(300):
            if call_id not in voice.app.state.service.realtime.calls.ids():
                break
            time.sleep(0.1)
        seconds = time.monotonic() - start
    finally:
        settings.connect_seconds = kept
    assert status == 201
    assert seconds < 5 * slack()  # connect_seconds, and the call's end
