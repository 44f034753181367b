"""Voice latency of the Realtime API: from the end of the user's speech (the last audio frame with speech,
sent at real-time pace) to the first `response.output_audio.delta`, split into the speech detector's wait,
transcription, the first text and the first audio; against the same chain done by hand over the HTTP
endpoints (transcription, a streamed chat answer up to its first clause, speech of that clause) in the
same run, started after the same silence.

    .venv/bin/python -m bench.realtime [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import re
import time
import wave
from typing import Any

import numpy as np
import openai

from bench.common import http_client, machine, modelport_server, table

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


async def main(turns: int) -> None:
    print(f"# Realtime voice latency, {turns} turns each, ms after the end of speech\n\n{machine()}")
    with modelport_server(CONFIG) as url:
        client = http_client(url)
        spoken = []
        for question in QUESTIONS:
            speech = await client.audio.speech.create(
                model="tts-1", voice="alloy", input=question, response_format="pcm"
            )
            spoken.append(speech.content)
        await realtime_turn(url, spoken[0])  # warm-up
        results: dict[str, list[dict[str, float]]] = {"realtime": [], "by hand over HTTP": []}
        for i in range(turns):
            pcm = spoken[i % len(spoken)]
            results["realtime"].append(await realtime_turn(url, pcm))
            results["by hand over HTTP"].append(await by_hand(url, pcm))
    stages = ["vad", "transcribed", "first text", "first audio"]
    rows = []
    for name, marks in results.items():
        row: list[Any] = [name]
        for stage in stages:
            values = np.array([m[stage] for m in marks if stage in m]) * 1000
            row.append(f"{np.percentile(values, 50):.0f} / {np.percentile(values, 95):.0f}")
        beyond = np.array([m["first audio"] for m in marks]) * 1000 - SILENCE_MS
        row.append(f"{np.percentile(beyond, 50):.0f} / {np.percentile(beyond, 95):.0f}")
        rows.append(row)
    headers = ["", *(f"{s} p50 / p95" for s in stages), "first audio beyond the silence p50 / p95"]
    print(table("Time from the end of speech (ms)", headers, rows))
    print(f"\nTarget: first audio ≤ 700 ms beyond silence_duration_ms ({SILENCE_MS} ms) at p50.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    asyncio.run(main(parser.parse_args().turns))
