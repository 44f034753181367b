"""Soak: many concurrent clients mixing every endpoint for a while against one server on loopback; counts
answers by status, hangs and latencies per kind (p50, p99, p99.9, max: the tail's ceiling is max ≤ 10×
p99), the watchdog's reports of stalled calls, and the server's RSS as it goes.

    .venv/bin/python -m bench.soak [--clients 32] [--seconds 180] [--busy 1] [--mix traffic] [--config …]

The kinds include identical greedy 160-token completions repeated (`ignore_eos`, the conversation cache
on, as by default: where a 580-s request was once seen), streams left after their first
event, and tool calls. `--busy N` runs N processes spinning beside the server, as a busy neighbour. It
starts `modelport serve` on the default models itself; no other network is touched. The clients run at a
higher priority than the server where the machine allows it, and the report says how late their own event
loop woke and which slow requests the server's own histogram saw: what the clients wait for themselves is
not the server's.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import multiprocessing
import os
import random
import time
import wave
from collections import defaultdict
from dataclasses import dataclass, field

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from bench.common import machine, modelport_logged, rss_mib, table

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
SAME = {
    "model": "gpt-3.5-turbo-instruct",
    "prompt": "The history of the printing press begins",
    "max_tokens": 160,
    "temperature": 0,
    "ignore_eos": True,
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@dataclass
class Tally:
    statuses: dict[str, dict[int, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    hangs: int = 0
    dropped: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    rss_mib: list[tuple[float, float]] = field(default_factory=list)
    # How late the clients' own event loop woke from 50-ms sleeps (a request it timed was late by as much),
    # and when (seconds into the run).
    client_lags: list[tuple[float, float]] = field(default_factory=list)
    # Each kind's slowest request: how long, and when it began (seconds into the run), to set beside the
    # server's log and the clients' lags.
    slowest: dict[str, tuple[float, float]] = field(default_factory=dict)


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
    if kind == "identical completion":
        return (await client.post("/v1/completions", json=SAME)).status_code
    if kind == "identical completion stream":
        async with client.stream("POST", "/v1/completions", json={**SAME, "stream": True}) as response:
            async for _ in response.aiter_lines():
                pass
            return response.status_code
    if kind == "left stream":
        async with client.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    break
            return response.status_code
    if kind == "tool call":
        body = {**CHAT, "tools": [WEATHER], "tool_choice": "required", "max_tokens": 48}
        return (await client.post("/v1/chat/completions", json=body)).status_code
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


KINDS = [
    "models", "chat", "chat stream", "completion stream", "identical completion",
    "identical completion stream", "left stream", "tool call", "embeddings", "speech", "transcription", "bad",
]  # fmt: skip
# `--mix traffic`: how often each kind comes in a day of an API's traffic rather than equally often (most
# requests are short; a long one is rarer), so that a long soak sends tens of thousands of requests.
TRAFFIC = {
    "models": 12, "chat": 10, "chat stream": 8, "completion stream": 6, "identical completion": 1,
    "identical completion stream": 1, "left stream": 6, "tool call": 3, "embeddings": 20, "speech": 4,
    "transcription": 2, "bad": 6,
}  # fmt: skip


async def soak(
    url: str, pid: int | None, clients: int, seconds: float, weights: list[float] | None = None
) -> Tally:
    tally = Tally()
    # Every client is made before the clock starts: each builds an SSL context (~20 ms of this loop's time,
    # though the URL is http), and 32 built at once held the first requests of the run for 0.6 s.
    clients_made = [httpx.AsyncClient(base_url=url, timeout=HANG_SECONDS) for _ in range(clients)]
    deadline = time.monotonic() + seconds
    start = time.monotonic()

    async def client_loop(client: httpx.AsyncClient) -> None:
        async with client:
            while time.monotonic() < deadline:
                kind = random.choices(KINDS, weights)[0]
                began = time.monotonic()
                try:
                    status = await one_request(client, kind)
                except httpx.TimeoutException:
                    tally.hangs += 1
                    continue
                except httpx.TransportError as error:  # a dropped connection: counted as a status of its own
                    tally.dropped[kind].append(f"{type(error).__name__}: {error}")
                    status = 0
                took = time.monotonic() - began
                tally.statuses[kind][status] += 1
                tally.latencies[kind].append(took)
                if took > tally.slowest.get(kind, (0.0, 0.0))[0]:
                    tally.slowest[kind] = (took, began - start)

    async def watch_memory() -> None:
        while pid is not None and time.monotonic() < deadline:
            tally.rss_mib.append((time.monotonic() - start, rss_mib(pid)))
            await asyncio.sleep(max(1.0, seconds / 20))

    async def watch_own_loop() -> None:
        while time.monotonic() < deadline:
            asked = time.monotonic()
            await asyncio.sleep(0.05)
            tally.client_lags.append((time.monotonic() - asked - 0.05, asked - start))

    await asyncio.gather(watch_memory(), watch_own_loop(), *(client_loop(c) for c in clients_made))
    if pid is not None:
        tally.rss_mib.append((time.monotonic() - start, rss_mib(pid)))
    return tally


def _quantile(times: list[float], q: float) -> float:
    return times[min(len(times) - 1, int(len(times) * q))]


def report(tally: Tally, seconds: float, stalled: int | None = None) -> str:
    rows = []
    for kind in KINDS:
        times = sorted(tally.latencies[kind])
        if not times:
            continue
        statuses = ", ".join(f"{s}: {n}" for s, n in sorted(tally.statuses[kind].items()))
        p99 = _quantile(times, 0.99)
        rows.append(
            [
                kind, len(times), statuses, _quantile(times, 0.5) * 1000, p99 * 1000,
                _quantile(times, 0.999) * 1000, times[-1] * 1000, times[-1] / p99,
            ]
        )  # fmt: skip
    total = sum(len(t) for t in tally.latencies.values())
    errors = sum(n for by in tally.statuses.values() for s, n in by.items() if s >= 500 or s == 0)
    columns = ["kind", "count", "statuses", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "max/p99"]
    lines = [table("Requests", columns, rows)]
    rate = total / seconds
    lines.append(f"\n{total} requests in {seconds:.0f} s ({rate:.1f}/s); 5xx: {errors}; hangs: {tally.hangs}")
    for kind, errors in tally.dropped.items():
        lines.append(f"dropped connections ({kind}): {len(errors)}, first: {errors[0]}")
    if stalled is not None:
        lines.append(f"calls the watchdog found stalled (30 s without progress): {stalled}")
    if tally.slowest:
        slowest = (f"{kind} +{at:.0f} s ({took * 1000:.0f} ms)" for kind, (took, at) in tally.slowest.items())
        lines.append("each kind's slowest began at: " + ", ".join(slowest))
    if tally.client_lags:
        late = sum(lag > 0.25 for lag, _ in tally.client_lags)
        worst, when = max(tally.client_lags)
        lines.append(
            f"the clients' own event loop: woke late by {worst * 1000:.0f} ms at most "
            f"(+{when:.0f} s), {late} times by over 250 ms (a request timed then is late by as "
            "much, whatever the server did)"
        )
    if tally.rss_mib:
        # Every fourth sample of ~20, so the curve shows whether memory stops growing.
        marks = tally.rss_mib[::4] + ([tally.rss_mib[-1]] if len(tally.rss_mib) % 4 != 1 else [])
        lines.append("server RSS: " + ", ".join(f"{mib:.0f} MiB at {t:.0f} s" for t, mib in marks))
    return "\n".join(lines)


# The kinds whose route is theirs alone, so the server's own latency histogram can be read for them.
ROUTES = {
    "models": "/v1/models",
    "embeddings": "/v1/embeddings",
    "speech": "/v1/audio/speech",
    "transcription": "/v1/audio/transcriptions",
}


def server_side(url: str) -> str:
    """How many requests of the cheap kinds took over 0.25 s and over 1 s inside the server, by its own
    histogram (`modelport_request_seconds`, from the middleware's first byte in to its last byte out): a
    slow request the client saw but the server did not was slow in the client or on the way."""
    over: dict[str, dict[str, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=30).text):
        if family.name == "modelport_gc_pause_seconds":
            over["gc"].setdefault("+Inf", 0.0)
            for sample in family.samples:
                if sample.name.endswith("_bucket") and sample.labels["generation"] == "2":
                    over["gc"][sample.labels["le"]] = sample.value
        if family.name != "modelport_request_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                over[sample.labels["route"]][sample.labels["le"]] = sample.value
    lines = []
    pauses = over.get("gc")
    for kind, route in ROUTES.items():
        buckets = over.get(route)
        if buckets:
            total = buckets["+Inf"]
            lines.append(
                f"{kind}: {total - buckets['0.25']:.0f} over 0.25 s, {total - buckets['1.0']:.0f} over 1 s "
                f"of {total:.0f}"
            )
    said = "inside the server (its histogram): " + "; ".join(lines)
    if pauses:  # the collector's full passes after start-up: every request in the server waited for each
        total = pauses["+Inf"]
        said += (
            f"\nthe garbage collector's full passes: {total:.0f}, {total - pauses.get('0.1', 0.0):.0f} over "
            f"0.1 s, {total - pauses.get('0.25', 0.0):.0f} over 0.25 s"
        )
    return said


def _spin() -> None:
    while True:
        pass


def main(clients: int, seconds: float, config: str | None, busy: int, mix: str) -> None:
    print(
        f"# Soak: {clients} clients, {seconds:.0f} s, every endpoint ({mix} mix), {busy} busy neighbours\n\n"
        f"{machine()}"
    )
    weights = [float(TRAFFIC[kind]) for kind in KINDS] if mix == "traffic" else None
    neighbours = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(busy)]
    with modelport_logged(*(["--config", config] if config else [])) as (url, pid, log):
        for neighbour in neighbours:
            neighbour.start()
        # The clients time the server: where the machine lets them, they run ahead of it and of the
        # neighbours (started before, so neither inherits it), so that their own wait for a core is not
        # counted as the server's.
        try:
            os.setpriority(os.PRIO_PROCESS, 0, -10)
            print("clients at priority -10 (the server and the neighbours at 0)\n")
        except PermissionError:
            print("clients at the server's priority (raising it needs CAP_SYS_NICE)\n")
        try:
            tally = asyncio.run(soak(url, pid, clients, seconds, weights))
        finally:
            for neighbour in neighbours:
                neighbour.terminate()
        stalled = sum("has waited" in line for line in log().splitlines())
        inside = server_side(url)
    print(report(tally, seconds, stalled))
    print(inside)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--config", help="a models.toml for the server (its models override the defaults)")
    parser.add_argument("--busy", type=int, default=0, help="processes spinning beside the server")
    parser.add_argument(
        "--mix",
        choices=["even", "traffic"],
        default="even",
        help="every kind equally often, or as often as in an API's traffic (mostly short requests)",
    )
    arguments = parser.parse_args()
    main(arguments.clients, arguments.seconds, arguments.config, arguments.busy, arguments.mix)
