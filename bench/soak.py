"""Soak: many concurrent clients mixing every endpoint for a while against one server on loopback; counts
answers by status, hangs and latencies per endpoint, and the server's RSS as it goes.

    .venv/bin/python -m bench.soak [--clients 32] [--seconds 180] [--config models.toml]

It starts `modelport serve` on the default models itself; no other network is touched.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import random
import time
import wave
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from bench.common import machine, modelport_process, table

HANG_SECONDS = 120


def _wav(seconds: float = 2.0) -> bytes:
    """A short tone: something to transcribe (Whisper answers with little or nothing)."""
    t = np.arange(int(16000 * seconds)) / 16000
    samples = (0.2 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(samples.tobytes())
    return out.getvalue()


WAV = _wav()
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say something short."}]}


@dataclass
class Tally:
    statuses: dict[str, dict[int, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    hangs: int = 0
    rss_mib: list[tuple[float, float]] = field(default_factory=list)


async def one_request(client: httpx.AsyncClient, kind: str) -> int:
    """One request of a kind; streams are read to the end (or, one in four, left after the first event)."""
    if kind == "models":
        return (await client.get("/v1/models")).status_code
    if kind == "chat":
        return (await client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 16})).status_code
    if kind in ("chat stream", "completion stream"):
        path, body = (
            ("/v1/chat/completions", {**CHAT, "max_tokens": 24, "stream": True})
            if kind == "chat stream"
            else (
                "/v1/completions",
                {"model": "gpt-3.5-turbo-instruct", "prompt": "Once", "max_tokens": 24, "stream": True},
            )
        )
        leave_early = random.random() < 0.25
        async with client.stream("POST", path, json=body) as response:
            async for line in response.aiter_lines():
                if leave_early and line.startswith("data: "):
                    break
            return response.status_code
    if kind == "embeddings":
        texts = [f"text {random.random()}" for _ in range(random.choice([1, 4, 16]))]
        return (
            await client.post("/v1/embeddings", json={"model": "text-embedding-3-small", "input": texts})
        ).status_code
    if kind == "speech":
        body = {
            "model": "espeak-ng",
            "voice": "en-us",
            "input": "A short sentence to say.",
            "response_format": "mp3",
        }
        return (await client.post("/v1/audio/speech", json=body)).status_code
    if kind == "transcription":
        files = {"file": ("tone.wav", WAV, "audio/wav")}
        return (
            await client.post("/v1/audio/transcriptions", files=files, data={"model": "whisper-1"})
        ).status_code
    if kind == "bad":
        return (await client.post("/v1/chat/completions", json={**CHAT, "max_tokens": -1})).status_code
    raise ValueError(kind)


KINDS = ["models", "chat", "chat stream", "completion stream", "embeddings", "speech", "transcription", "bad"]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def soak(url: str, pid: int | None, clients: int, seconds: float) -> Tally:
    tally = Tally()
    deadline = time.monotonic() + seconds
    start = time.monotonic()

    async def client_loop() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=HANG_SECONDS) as client:
            while time.monotonic() < deadline:
                kind = random.choice(KINDS)
                began = time.monotonic()
                try:
                    status = await one_request(client, kind)
                except httpx.TimeoutException:
                    tally.hangs += 1
                    continue
                tally.statuses[kind][status] += 1
                tally.latencies[kind].append(time.monotonic() - began)

    async def watch_memory() -> None:
        while pid is not None and time.monotonic() < deadline:
            tally.rss_mib.append((time.monotonic() - start, rss_mib(pid)))
            await asyncio.sleep(max(1.0, seconds / 20))

    await asyncio.gather(watch_memory(), *(client_loop() for _ in range(clients)))
    if pid is not None:
        tally.rss_mib.append((time.monotonic() - start, rss_mib(pid)))
    return tally


def report(tally: Tally, seconds: float) -> str:
    rows = []
    for kind in KINDS:
        times = sorted(tally.latencies[kind])
        if not times:
            continue
        statuses = ", ".join(f"{s}: {n}" for s, n in sorted(tally.statuses[kind].items()))
        rows.append(
            [kind, len(times), statuses, times[len(times) // 2] * 1000, times[int(len(times) * 0.99)] * 1000]
        )
    total = sum(len(t) for t in tally.latencies.values())
    errors = sum(n for by in tally.statuses.values() for s, n in by.items() if s >= 500)
    lines = [table("Requests", ["kind", "count", "statuses", "p50 ms", "p99 ms"], rows)]
    rate = total / seconds
    lines.append(f"\n{total} requests in {seconds:.0f} s ({rate:.1f}/s); 5xx: {errors}; hangs: {tally.hangs}")
    if tally.rss_mib:
        # Every fourth sample of ~20, so the curve shows whether memory stops growing.
        marks = tally.rss_mib[::4] + ([tally.rss_mib[-1]] if len(tally.rss_mib) % 4 != 1 else [])
        lines.append("server RSS: " + ", ".join(f"{mib:.0f} MiB at {t:.0f} s" for t, mib in marks))
    return "\n".join(lines)


def main(clients: int, seconds: float, config: str | None) -> None:
    print(f"# Soak: {clients} clients, {seconds:.0f} s, every endpoint\n\n{machine()}")
    with modelport_process(*(["--config", config] if config else [])) as (url, pid):
        tally = asyncio.run(soak(url, pid, clients, seconds))
    print(report(tally, seconds))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--config", help="a models.toml for the server (its models override the defaults)")
    arguments = parser.parse_args()
    main(arguments.clients, arguments.seconds, arguments.config)
