"""Benchmark 5: server overhead on tiny requests — requests/s and p50/p99 latency of `GET /v1/models` and
of a 1-token completion, at 32 concurrent clients, modelport vs llama-server on the same GGUF. The
completion is asked twice: the same prompt every time (what a cache of prompts can spare), and a prompt of
its own each time (one-off questions: what every request costs the server around its tokens).

    .venv/bin/python -m bench.overhead [--seconds 5] [--clients 32]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

import httpx

from bench import references
from bench.common import llama_server, machine, modelport_server, table
from bench.decode import CHAT, CONFIG, N_CTX, SLOTS
from modelport.engines import llamacpp

COMPLETION = {"model": CHAT, "prompt": "Hello", "max_tokens": 1, "temperature": 0}


async def load(
    url: str, clients: int, seconds: float, body: Callable[[int], dict[str, Any]] | None
) -> list[float]:
    """Each client sends one request after another for `seconds` (`GET /v1/models`, or the completion
    `body(n)` for the n-th request sent); returns every latency (non-200s fail)."""
    latencies: list[float] = []
    sent = itertools.count()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def one() -> None:
            start = time.perf_counter()
            if body is None:
                response = await client.get("/v1/models")
            else:
                response = await client.post("/v1/completions", json=body(next(sent)))
            response.raise_for_status()
            latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(one() for _ in range(clients)))  # warm-up, connections opened
        latencies.clear()
        deadline = time.perf_counter() + seconds

        async def client_loop() -> None:
            while time.perf_counter() < deadline:
                await one()

        await asyncio.gather(*(client_loop() for _ in range(clients)))
    return latencies


KINDS: dict[str, Callable[[int], dict[str, Any]] | None] = {
    "GET /v1/models": None,
    "1-token completion, the same prompt": lambda _: COMPLETION,
    "1-token completion, a prompt of its own each": lambda n: {**COMPLETION, "prompt": f"Hello {n}"},
}


def summary(latencies: list[float], seconds: float) -> tuple[float, float, float]:
    ordered = sorted(latencies)
    return (
        len(ordered) / seconds,
        ordered[len(ordered) // 2] * 1000,
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    )


def main(seconds: float, clients: int) -> None:
    print(f"# Tiny requests at {clients} concurrent clients, {seconds:.0f} s each\n\n{machine()}")
    results: dict[str, dict[str, tuple[float, float, float]]] = {}

    def measure(name: str, url: str) -> None:
        results[name] = {
            what: summary(asyncio.run(load(url, clients, seconds, body)), seconds)
            for what, body in KINDS.items()
        }

    with modelport_server(CONFIG) as url:
        measure("modelport", url)
    binary = references.llama_server()
    if binary is None:
        print("\nllama-server: not built (python -m bench.references); its rows are absent.")
    else:
        with llama_server(binary, llamacpp.default_gguf(), SLOTS, N_CTX) as url:
            measure("llama-server", url)
    rows = []
    for what in KINDS:
        for name, values in results.items():
            rate, p50, p99 = values[what]
            ratio = rate / results["llama-server"][what][0] if "llama-server" in results else float("nan")
            rows.append([what, name, rate, p50, p99, f"{ratio:.2f}"])
    print(table("Requests", ["request", "server", "req/s", "p50 ms", "p99 ms", "req/s × llama-server"], rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=32)
    arguments = parser.parse_args()
    main(arguments.seconds, arguments.clients)
