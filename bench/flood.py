"""Benchmark: what one client's flood of WebSocket messages costs everyone else: `/health`'s latency, probed
from a process of its own every 20 ms, while one connection sends N messages as fast as it can — realtime
`conversation.item.create` with ids of its own (past the conversation's cap of items: the rest refused), and
Responses WebSocket turns on lanes of their own (past the connection's cap of lanes) — beside the same probe
with nobody flooding, in the same run.

    .venv/bin/python -m bench.flood [--messages 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

import httpx
import websockets

from bench.common import machine, modelport_server, table

CONFIG = "defaults = true\n"


def _probe(url: str, stop: Connection) -> None:
    """`/health` every 20 ms until told to stop; sends back each answer's seconds."""
    waits = []
    with httpx.Client(base_url=url, timeout=300) as client:
        while not stop.poll():
            start = time.perf_counter()
            client.get("/health")
            waits.append(time.perf_counter() - start)
            time.sleep(0.02)
    stop.send(waits)


def probed(url: str, flood: Callable[[], float]) -> list[float]:
    """The flood's seconds, then `/health`'s latencies (ms: median, p99, max) while it ran."""
    ours, theirs = multiprocessing.Pipe()
    prober = multiprocessing.get_context("spawn").Process(target=_probe, args=(url, theirs))
    prober.start()
    time.sleep(1)
    took = flood()
    ours.send("stop")
    waits = sorted(ours.recv())
    prober.join()
    at = [len(waits) // 2, int(len(waits) * 0.99), len(waits) - 1]
    return [took, *(waits[i] * 1000 for i in at)]


async def items(url: str, messages: int) -> float:
    start = time.perf_counter()
    async with websockets.connect(url.replace("http", "ws") + "/v1/realtime?model=gpt-realtime") as ws:
        await ws.recv()
        for i in range(messages):
            item = {"id": f"item_{i}", "type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "x" * 200}]}  # fmt: skip
            await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
        await ws.send(json.dumps({"type": "conversation.item.retrieve", "item_id": "item_0"}))
        while json.loads(await ws.recv())["type"] != "conversation.item.retrieved":
            pass
    return time.perf_counter() - start


async def lanes(url: str, messages: int) -> float:
    start = time.perf_counter()
    async with websockets.connect(url.replace("http", "ws") + "/v1/responses") as ws:
        # Each on a lane of its own, past the cap refused; the lanes held answer a model that is not there
        # (a 404 event): the loop's own work, not the model's.
        for i in range(messages):
            turn = {"type": "response.create", "model": "no-such-model", "input": "Hi"}
            await ws.send(json.dumps({**turn, "stream_id": f"lane_{i}"}))
        answered = 0
        while answered < messages:
            event = json.loads(await ws.recv())
            answered += event["type"] == "error"
    return time.perf_counter() - start


def idle() -> float:
    time.sleep(5)
    return 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args()
    print(machine())
    n = args.messages
    with modelport_server(CONFIG) as url:
        rows = [
            ["nobody", 0, *probed(url, idle)],
            ["realtime items", n, *probed(url, lambda: asyncio.run(items(url, n)))],
            ["Responses socket lanes", n, *probed(url, lambda: asyncio.run(lanes(url, n)))],
        ]
    headers = ["flood", "messages", "flood s", "/health median ms", "p99 ms", "max ms"]
    print(table("/health while one connection floods", headers, rows))


if __name__ == "__main__":
    main()
