"""Voice latency of the Realtime API: from the end of the user's speech (the last audio frame with speech,
sent at real-time pace) to the first answer audio, split into the speech detector's wait, transcription,
the first text and the first audio; over a WebSocket (the first `response.output_audio.delta`), over
WebRTC (aiortc as the browser: the first answer audio heard on the call's track, Opus both ways), and
against the same chain done by hand over the HTTP endpoints (transcription, a streamed chat answer up to
its first clause, speech of that clause), in the same run, started after the same silence. Then WebRTC
calls held at once: the server's CPU per idle call (Opus and speech detection at real time), and first
audio when every call asks at once.

    .venv/bin/python -m bench.realtime [--turns 20] [--calls 1,2,4]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import re
import time
import wave
from typing import Any

import httpx
import numpy as np
import openai
from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from bench.common import cpu_seconds, http_client, machine, modelport_configured, table
from tests.support.microphone import Microphone

CONFIG = """defaults = true
"""
RATE = 24_000
CHUNK_MS = 40
SILENCE_MS = 500  # server_vad's default silence_duration_ms
QUESTIONS = [
    "What is the capital of France?",
    "Tell me something about the ocean.",
    "How do I boil an egg?",
    "What colour is the sky on a clear day?",
    "Name a good book to read this winter.",
]
_CLAUSE = re.compile(r"[.!?;:](\s|$)|\n")


async def realtime_turn(url: str, pcm: bytes) -> dict[str, float]:
    """One turn in a new session; seconds from the end of speech to each stage."""
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0)
    marks: dict[str, float] = {}
    async with client.realtime.connect(model="gpt-realtime", max_retries=0) as connection:
        await connection.recv()
        transcription = {"model": "whisper-1", "language": "en"}
        await connection.session.update(
            session={"type": "realtime", "audio": {"input": {"transcription": transcription}}}
        )
        await connection.recv()
        step = RATE * 2 * CHUNK_MS // 1000
        audio = pcm + bytes(RATE * 2 * 3)  # then silence, still at real-time pace
        started = time.perf_counter()

        async def send() -> None:
            for i, at in enumerate(range(0, len(audio), step)):
                await connection.input_audio_buffer.append(
                    audio=base64.b64encode(audio[at : at + step]).decode()
                )
                await asyncio.sleep(max(0.0, started + (i + 1) * CHUNK_MS / 1000 - time.perf_counter()))

        sender = asyncio.create_task(send())
        end_of_speech = started + len(pcm) / 2 / RATE
        names = {
            "input_audio_buffer.speech_stopped": "vad",
            "conversation.item.input_audio_transcription.completed": "transcribed",
            "response.output_audio_transcript.delta": "first text",
            "response.output_audio.delta": "first audio",
        }
        async for event in connection:
            name = names.get(event.type)
            if name and name not in marks:
                marks[name] = time.perf_counter() - end_of_speech
            if "first audio" in marks and "transcribed" in marks:
                break
        sender.cancel()
    return marks


class _Call:
    """A WebRTC call as a browser makes it, with marks of what it heard and when."""

    def __init__(self) -> None:
        self.peer = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.speaker = Microphone()
        self.peer.addTrack(self.speaker)
        self.channel = self.peer.createDataChannel("oai-events")
        self.events: list[tuple[float, str]] = []
        self.heard: float | None = None  # when the first answer audio arrived
        self.changed = asyncio.Event()  # an event came, or the answer was first heard
        self.channel.on("message", self._event)
        self.tasks: list[asyncio.Task[None]] = []
        self.peer.on("track", lambda track: self.tasks.append(asyncio.ensure_future(self._listen(track))))

    def _event(self, text: str) -> None:
        self.events.append((time.perf_counter(), json.loads(text)["type"]))
        self.changed.set()

    async def _until(self, done: Any, seconds: float = 60) -> None:
        async with asyncio.timeout(seconds):
            while not done():
                self.changed.clear()
                await self.changed.wait()

    async def _listen(self, track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            waiting = self.heard is None and self.speaker.spoken is not None
            if waiting and np.abs(frame.to_ndarray()).max() > 300:  # not the silence between answers
                self.heard = time.perf_counter()
                self.changed.set()

    async def open(self, url: str) -> None:
        await self.peer.setLocalDescription(await self.peer.createOffer())
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"{url}/v1/realtime/calls",
                content=self.peer.localDescription.sdp,
                headers={"Content-Type": "application/sdp", "Authorization": "Bearer bench"},
            )
        answer.raise_for_status()
        await self.peer.setRemoteDescription(RTCSessionDescription(answer.text, "answer"))
        await self._until(lambda: any(kind == "session.created" for _, kind in self.events))
        session = {
            "type": "realtime",
            "audio": {"input": {"transcription": {"model": "whisper-1", "language": "en"}}},
        }
        self.channel.send(json.dumps({"type": "session.update", "session": session}))

    async def turn(self, pcm: bytes) -> dict[str, float]:
        """Say `pcm`; seconds from the end of speech to each stage, the first audio as heard."""
        self.events.clear()
        self.heard = None
        self.speaker.say(pcm)
        await self._until(lambda: self.heard is not None)
        assert self.speaker.spoken is not None
        names = {
            "input_audio_buffer.speech_stopped": "vad",
            "conversation.item.input_audio_transcription.completed": "transcribed",
            "response.output_audio_transcript.delta": "first text",
        }
        marks: dict[str, float] = {}
        for at, kind in self.events:
            if kind in names and names[kind] not in marks:
                marks[names[kind]] = at - self.speaker.spoken
        if self.heard is not None:
            marks["first audio"] = self.heard - self.speaker.spoken
        # The answer is cut where a listener would cut it (a default answer may speak for minutes) and has
        # stopped before the next turn (its audio would be heard as the next one's).
        self.channel.send(json.dumps({"type": "response.cancel"}))
        self.channel.send(json.dumps({"type": "output_audio_buffer.clear"}))
        ended = ("output_audio_buffer.stopped", "output_audio_buffer.cleared")
        await self._until(lambda: any(kind in ended for _, kind in self.events))
        return marks

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await self.peer.close()


async def webrtc_turn(url: str, pcm: bytes) -> dict[str, float]:
    """One turn in a new call."""
    call = _Call()
    try:
        await call.open(url)
        await asyncio.sleep(0.3)  # the session update taken, audio flowing
        return await call.turn(pcm)
    finally:
        await call.close()


async def concurrent_calls(url: str, pid: int, count: int, pcm: bytes) -> list[Any]:
    """`count` calls held at once: the server's CPU per call over 10 s of silence, and first audio when
    they all ask at once."""
    calls = [_Call() for _ in range(count)]
    try:
        for call in calls:
            await call.open(url)
        await asyncio.sleep(1.0)
        before, started = cpu_seconds(pid), time.perf_counter()
        await asyncio.sleep(10.0)
        idle = (cpu_seconds(pid) - before) / (time.perf_counter() - started)
        turns = await asyncio.gather(*(call.turn(pcm) for call in calls))
    finally:
        await asyncio.gather(*(call.close() for call in calls))
    first = np.array([t["first audio"] for t in turns if "first audio" in t]) * 1000
    return [
        count,
        f"{idle / count * 100:.1f}%",
        f"{np.percentile(first, 50):.0f} / {first.max():.0f}" if len(first) else "-",
        f"{len(first)}/{count}",
    ]


async def by_hand(url: str, pcm: bytes) -> dict[str, float]:
    """The same chain over HTTP: after the same silence, transcribe, stream the answer to its first clause,
    and speak that clause."""
    client = http_client(url)
    await asyncio.sleep(len(pcm) / 2 / RATE + SILENCE_MS / 1000)  # the user speaks, then is silent
    start = time.perf_counter() - SILENCE_MS / 1000
    marks = {"vad": SILENCE_MS / 1000}
    text = (
        await client.audio.transcriptions.create(model="whisper-1", file=("q.wav", _wav(pcm)), language="en")
    ).text
    marks["transcribed"] = time.perf_counter() - start
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}], stream=True
    )
    said = ""
    async for chunk in stream:
        piece = chunk.choices[0].delta.content if chunk.choices else None
        if piece:
            marks.setdefault("first text", time.perf_counter() - start)
            said += piece
            if _CLAUSE.search(said):
                break
    await stream.close()
    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=said, response_format="pcm"
    ) as speech:
        async for _ in speech.iter_bytes():
            marks["first audio"] = time.perf_counter() - start
            break
    return marks


def _wav(pcm: bytes) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(RATE)
        file.writeframes(pcm)
    return out.getvalue()


async def main(turns: int, counts: list[int]) -> None:
    print(f"# Realtime voice latency, {turns} turns each, ms after the end of speech\n\n{machine()}")
    with modelport_configured(CONFIG) as (url, pid):
        client = http_client(url)
        spoken = []
        for question in QUESTIONS:
            speech = await client.audio.speech.create(
                model="tts-1", voice="alloy", input=question, response_format="pcm"
            )
            spoken.append(speech.content)
        await realtime_turn(url, spoken[0])  # warm-up
        await webrtc_turn(url, spoken[0])
        results: dict[str, list[dict[str, float]]] = {
            "realtime, WebSocket": [],
            "realtime, WebRTC (heard)": [],
            "by hand over HTTP": [],
        }
        for i in range(turns):  # interleaved, so that any drift of the machine touches each alike
            pcm = spoken[i % len(spoken)]
            results["realtime, WebSocket"].append(await realtime_turn(url, pcm))
            results["realtime, WebRTC (heard)"].append(await webrtc_turn(url, pcm))
            results["by hand over HTTP"].append(await by_hand(url, pcm))
        held = [await concurrent_calls(url, pid, count, spoken[0]) for count in counts]
    stages = ["vad", "transcribed", "first text", "first audio"]
    rows = []
    for name, marks in results.items():
        row: list[Any] = [name]
        for stage in stages:
            values = np.array([m[stage] for m in marks if stage in m]) * 1000
            row.append(f"{np.percentile(values, 50):.0f} / {np.percentile(values, 95):.0f}")
        beyond = np.array([m["first audio"] for m in marks if "first audio" in m]) * 1000 - SILENCE_MS
        row.append(f"{np.percentile(beyond, 50):.0f} / {np.percentile(beyond, 95):.0f}")
        rows.append(row)
    headers = ["", *(f"{s} p50 / p95" for s in stages), "first audio beyond the silence p50 / p95"]
    print(table("Time from the end of speech (ms)", headers, rows))
    print(f"\nTarget: first audio ≤ 700 ms beyond silence_duration_ms ({SILENCE_MS} ms) at p50.\n")
    print(
        table(
            "WebRTC calls held at once",
            [
                "calls",
                "server CPU per idle call (of one core)",
                "first audio when all ask, p50 / max (ms)",
                "answered",
            ],
            held,
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--calls", default="1,2,4", help="how many WebRTC calls to hold at once, in turn")
    options = parser.parse_args()
    asyncio.run(main(options.turns, [int(n) for n in options.calls.split(",")]))
