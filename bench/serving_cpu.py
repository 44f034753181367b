"""Benchmark: the serving thread's CPU on the plain paths (chat, legacy completions and the Responses API,
streamed and not; no tools, no logprobs): `modelport serve`'s event-loop thread (its main one, which does all
of the server's Python work per request and per token), measured from /proc while requests of 16 and of 272
tokens run one at a time. Per request is what a 16-token request costs; per token is the difference over the
256 tokens more, so a request's own costs (admission, usage, the store) do not hide in it. The thread's idle
cost (timers, background looks) is measured first and taken out. Wake-ups are the times the scheduler put
the thread on a CPU (`schedstat`): on two cores each costs more than a token's own work. With `--profile
FILE`, py-spy records the thread's stacks over the same requests instead (raw format), and its busiest
frames are printed: no CPU figures then, since py-spy stops the process at every sample.

The reference, measured the same way in the same run: the floor any Python server under uvicorn stands on,
a bare ASGI app (uvicorn's own choices: uvloop, httptools) streaming chunks of a chat chunk's size, each
handed over from another thread as llama.cpp's are, with no work of its own.

    .venv/bin/python -m bench.serving_cpu [--rounds 5] [--profile FILE] [--path "chat, streamed" ...]
        [--stream-interval MS ...]  # a server at each (the engine's default otherwise), in turn
    .venv/bin/python -m bench.serving_cpu --top FILE   # the profile's busiest frames, self and inclusive
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from bench.common import (
    NO_EOS,
    STORY,
    bench_model,
    cpu_seconds,
    http_client,
    machine,
    modelport_configured,
    table,
    thread_runs,
)
from bench.decode import CHAT, config
from tests.support.live import free_port, serving

# Tokens of a request; the difference is what a token costs. 16 at least: the Responses API's bound.
SHORT, LONG = 16, 272


async def request(client: Any, kind: str, stream: bool, index: int, tokens: int) -> None:
    prompt = f"{index}. {STORY}"
    common: dict[str, Any] = {"model": CHAT, "max_tokens": tokens, "logit_bias": NO_EOS, "temperature": 0}
    if kind == "chat":
        messages = [{"role": "user", "content": prompt}]
        answer = await client.chat.completions.create(messages=messages, stream=stream, **common)
    elif kind == "responses":
        answer = await client.responses.create(
            model=CHAT, input=prompt, stream=stream, max_output_tokens=tokens, store=False, temperature=0,
            extra_body={"logit_bias": NO_EOS},
        )  # fmt: skip
    else:
        answer = await client.completions.create(prompt=prompt, stream=stream, **common)
    if stream:
        async for _ in answer:
            pass


PATHS = [(kind, stream) for kind in ("chat", "completion", "responses") for stream in (True, False)]


def path_name(kind: str, stream: bool) -> str:
    return f"{kind}, {'streamed' if stream else 'whole'}"


FLOOR = "floor: a bare uvicorn stream, each chunk handed over from a thread"
_FLOOR_CHUNK = b"data: " + b"x" * 230 + b"\n\n"  # a chat chunk's size (~238 bytes on the wire)
_FLOOR_GAP = 0.007  # seconds between chunks: a token's time at ~140 tok/s


async def floor_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The floor's server: `/health`, and `/stream?n=N` streaming N chunks, each put on the event loop by a
    thread of its own (`call_soon_threadsafe`, as modelport's chunk stream does: one wake-up a chunk)."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if scope["path"] != "/stream":
        await send({"type": "http.response.body", "body": b"ok"})
        return
    count = int(scope["query_string"].decode().removeprefix("n="))
    loop, chunks = asyncio.get_running_loop(), asyncio.Queue[bytes]()

    def made() -> None:
        for _ in range(count):
            time.sleep(_FLOOR_GAP)
            loop.call_soon_threadsafe(chunks.put_nowait, _FLOOR_CHUNK)

    threading.Thread(target=made, daemon=True).start()
    for _ in range(count):
        await send({"type": "http.response.body", "body": await chunks.get(), "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def floor_row(rounds: int) -> list[object]:
    """The floor's row: its per-request and per-chunk CPU, measured as a path's are."""
    port = free_port()
    command = [sys.executable, "-m", "bench.serving_cpu", "--floor-server", str(port)]
    with serving(command, "/health", port, "the floor's server") as (url, pid):
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:

            async def stream(count: int) -> None:
                async with client.stream("POST", f"/stream?n={count}") as answer:
                    async for _ in answer.aiter_lines():
                        pass

            await stream(SHORT)
            spent, woken = {}, {}
            for tokens in (SHORT, LONG):
                before, runs = cpu_seconds(pid, pid), thread_runs(pid, pid)
                for _ in range(rounds):
                    await stream(tokens)
                spent[tokens] = (cpu_seconds(pid, pid) - before) / rounds
                woken[tokens] = (thread_runs(pid, pid) - runs) / rounds
    per_chunk = (spent[LONG] - spent[SHORT]) / (LONG - SHORT)
    wakes = (woken[LONG] - woken[SHORT]) / (LONG - SHORT)
    row = [FLOOR, spent[SHORT] * 1000, per_chunk * 1000, f"{per_chunk / _FLOOR_GAP * 100:.1f}%"]
    return [*row, f"{wakes:.3f}"]


async def measure(
    rounds: int, profile: str | None, paths: list[tuple[str, bool]], intervals: list[float | None]
) -> list[list[object]]:
    """The table's rows, a server in turn at each of `intervals`; or, with `profile`, py-spy's record of the
    same requests at the first and no rows (py-spy stops the process at every sample, which its CPU time
    would count)."""
    rows: list[list[object]] = []
    for interval in intervals:
        named = "" if len(intervals) == 1 else f" ({'default' if interval is None else f'{interval:g} ms'})"
        rows += await measure_one(rounds, profile, paths, interval, named)
        if profile is not None:
            return rows
    rows.append(await floor_row(rounds))
    return rows


async def measure_one(
    rounds: int, profile: str | None, paths: list[tuple[str, bool]], interval: float | None, named: str
) -> list[list[object]]:
    """One server's rows, each path's name followed by `named`."""
    rows: list[list[object]] = []
    with modelport_configured(config(bench_model("smollm2"), interval)) as (url, pid):
        client = http_client(url)
        # The model loaded, and each path answered once: a path's first answer imports what it needs (the
        # Responses types), which would count in its figures, or its profile.
        for kind, stream in paths:
            await request(client, kind, stream, 0, SHORT)
        if profile is not None:
            beside = str(Path(sys.executable).parent)  # the virtual environment's, when it is not on PATH
            spy_binary = shutil.which("py-spy", path=beside) or shutil.which("py-spy")
            assert spy_binary, "py-spy is not installed (it is one of the dev extra's)"
            recording = ["record", "-p", str(pid), "-r", "1000", "-f", "raw", "-o", profile, "--threads"]
            quiet = asyncio.subprocess.DEVNULL
            spy = await asyncio.create_subprocess_exec(spy_binary, *recording, stdout=quiet, stderr=quiet)
            for kind, stream in paths:
                for i in range(rounds):
                    await request(client, kind, stream, i + 1, LONG)
            spy.send_signal(signal.SIGINT)
            await asyncio.wait_for(spy.wait(), 60)
            return rows
        await asyncio.sleep(2)
        before, runs = cpu_seconds(pid, pid), thread_runs(pid, pid)
        await asyncio.sleep(10)
        idle = (cpu_seconds(pid, pid) - before) / 10  # CPU-seconds a second, doing nothing
        idle_runs = (thread_runs(pid, pid) - runs) / 10
        rows.append([f"idle{named}", f"{idle * 1000:.2f} ms a second", "", "", f"{idle_runs:.1f} a second"])
        for kind, stream in paths:
            spent, woken = {}, {}
            for tokens in (SHORT, LONG):
                before, start, runs = cpu_seconds(pid, pid), time.perf_counter(), thread_runs(pid, pid)
                for i in range(rounds):
                    await request(client, kind, stream, 1000 * tokens + i, tokens)
                wall = time.perf_counter() - start
                spent[tokens] = (cpu_seconds(pid, pid) - before - idle * wall) / rounds
                woken[tokens] = (thread_runs(pid, pid) - runs - idle_runs * wall) / rounds
            per_token = (spent[LONG] - spent[SHORT]) / (LONG - SHORT)
            rate = rounds * LONG / wall
            row = [path_name(kind, stream) + named, spent[SHORT] * 1000, per_token * 1000]
            wakes = (woken[LONG] - woken[SHORT]) / (LONG - SHORT)
            rows.append([*row, f"{per_token * rate * 100:.1f}%", f"{wakes:.3f}"])
    return rows


def top(path: str, thread: str = "MainThread", count: int = 25) -> None:
    """The busiest frames of one thread in a raw py-spy profile: by their own samples and with callees."""
    own: collections.Counter[str] = collections.Counter()
    within: collections.Counter[str] = collections.Counter()
    total = 0
    with open(path) as lines:
        for line in lines:
            stack, _, samples = line.rstrip().rpartition(" ")
            frames = stack.split(";")
            if thread not in frames[0] or len(frames) < 2:
                continue
            total += int(samples)
            own[frames[-1]] += int(samples)
            for frame in set(frames[1:]):
                within[frame] += int(samples)
    for title, counter in (("own samples", own), ("with callees", within)):
        rows = [[f"{n / total:.1%}", frame] for frame, n in counter.most_common(count)]
        print(table(f"{thread}: {total} samples, by {title}", ["share", "frame"], rows))


def main(
    rounds: int, profile: str | None, paths: list[tuple[str, bool]], intervals: list[float | None]
) -> None:
    print(
        f"# The serving thread's CPU, {rounds} requests of {SHORT} and of {LONG} tokens each\n\n{machine()}"
    )
    rows = asyncio.run(measure(rounds, profile, paths, intervals))
    if profile is not None:
        top(profile)
        return
    headers = ["path", "per request ms", "per token ms", "of a core at this rate", "wake-ups a token"]
    print(table("Serving thread (the event loop's), CPU", headers, rows))
    print(
        "\nTarget (issue 58): ≤ 0.1 ms a token, ≤ 3% of a core at single-stream speed. The floor's row "
        "is what a chunk costs a Python server that does nothing with it; a path's excess is modelport's."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="requests of each length on each path")
    parser.add_argument("--profile", help="record the serving thread's stacks with py-spy into this file")
    parser.add_argument("--top", help="print a recorded profile's busiest frames, and measure nothing")
    names = [path_name(kind, stream) for kind, stream in PATHS]
    parser.add_argument("--path", action="append", choices=names, help="only this path (again for more)")
    parser.add_argument(
        "--stream-interval",
        type=float,
        action="append",
        help="a server at this stream_interval_ms (ms; 0: each token at once), the servers in turn "
        "(again for more; default: one at the engine's default)",
    )
    parser.add_argument("--floor-server", type=int, help=argparse.SUPPRESS)  # serve the floor on this port
    arguments = parser.parse_args()
    chosen = [path for path in PATHS if arguments.path is None or path_name(*path) in arguments.path]
    if arguments.floor_server:
        port = arguments.floor_server
        uvicorn.run(floor_app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    elif arguments.top:
        top(arguments.top)
    else:
        main(arguments.rounds, arguments.profile, chosen, arguments.stream_interval or [None])
