"""Benchmark: modelport as a gateway — a front `modelport serve` relaying to an upstream, against the same
upstream called directly, in interleaved rounds of one run. Upstreams: a worker `modelport serve`, and
llama.cpp's llama-server when `bench.references` has built it.

Single-stream decode tok/s and time to first token, aggregate tok/s at 8 streams, and the front's CPU
time per relayed chunk (from /proc: user + system time of its process over the chunks it relayed).

    .venv/bin/python -m bench.proxy [--rounds 5] [--tokens 128] [--streams 8]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

from bench import references
from bench.common import (
    STORY,
    config_file,
    cpu_seconds,
    http_client,
    llama_server,
    machine,
    median,
    modelport_process,
    modelport_server,
    stream_completion,
    table,
)
from bench.concurrency import aggregate
from bench.decode import CHAT, CONFIG, N_CTX, SLOTS
from modelport.engines import llamacpp


def front_config(upstream: str, model: str) -> str:
    return (
        f'defaults = false\n[[models]]\nid = "{CHAT}"\nengine = "remote"\nupstreams = ["{upstream}/v1"]\n'
        f'upstream_model = "{model}"\n'
    )


@dataclass
class Samples:
    first_token: list[float] = field(default_factory=list)
    decode: list[float] = field(default_factory=list)
    aggregate: list[float] = field(default_factory=list)


async def single(url: str, model: str, tokens: int, index: int) -> tuple[float, float, int]:
    client = http_client(url)
    result = await stream_completion(client, model, f"{index}. {STORY}", tokens)
    await client.close()
    return result.first_token, result.tokens_per_second, result.tokens


def measure(
    name: str, upstream: str, model: str, rounds: int, tokens: int, streams: int
) -> list[list[object]]:
    with ExitStack() as stack:
        config = stack.enter_context(config_file(front_config(upstream, model)))
        front, front_pid = stack.enter_context(modelport_process("--config", config))
        direct, through = Samples(), Samples()
        chunks = 0
        cpu = 0.0
        for r in range(rounds):
            for samples, url, served in ((direct, upstream, model), (through, front, CHAT)):
                before = cpu_seconds(front_pid)
                first, rate, count = asyncio.run(single(url, served, tokens, r))
                total, _ = asyncio.run(aggregate(url, served, streams, tokens))
                if samples is through:
                    cpu += cpu_seconds(front_pid) - before
                    chunks += count + streams * tokens + 4  # the warm-up request relays 4
                samples.first_token.append(first)
                samples.decode.append(rate)
                samples.aggregate.append(total)
    rows: list[list[object]] = []
    for label, samples in ((f"{name} directly", direct), (f"modelport → {name}", through)):
        rows.append(
            [
                label,
                median(samples.first_token) * 1000,
                median(samples.decode),
                median(samples.aggregate),
            ]
        )
    ratio_decode = median(through.decode) / median(direct.decode)
    ratio_aggregate = median(through.aggregate) / median(direct.aggregate)
    extra_ms = (median(through.first_token) - median(direct.first_token)) * 1000
    rows[1] += [
        f"{ratio_decode:.3f}",
        f"{extra_ms:+.1f}",
        f"{ratio_aggregate:.3f}",
        f"{cpu / chunks * 1000:.3f}",
    ]
    rows[0] += ["1", "0", "1", ""]
    return rows


def main(rounds: int, tokens: int, streams: int, threads: int | None) -> None:
    print(f"# modelport in front of an upstream, {tokens} tokens, median of {rounds} interleaved rounds\n")
    print(machine() + (f"; upstream threads: {threads}" if threads else ""))
    rows: list[list[object]] = []
    started = time.perf_counter()
    for name, url, model in _each_upstream(threads):
        rows += measure(name, url, model, rounds, tokens, streams)
    headers = [
        "path",
        "first token ms",
        "decode tok/s",
        f"{streams} streams tok/s",
        "× decode",
        "+ms first token",
        f"× {streams} streams",
        "front CPU ms/chunk",
    ]
    print(table("Relayed streaming", headers, rows))
    print(
        "\nTargets: ≥ 0.97× the upstream's tokens/s, ≤ +3 ms time to first token, ≤ 0.2 ms of gateway CPU "
        f"per relayed chunk. Everything ran on this machine's cores ({time.perf_counter() - started:.0f} s)."
    )


def _each_upstream(threads: int | None) -> Iterator[tuple[str, str, str]]:
    with modelport_server(CONFIG + (f"n_threads = {threads}\n" if threads else "")) as url:
        yield "modelport worker", url, CHAT
    binary = references.llama_server()
    if binary is None:
        print("\nllama-server: not built (python -m bench.references); its rows are absent.")
        return
    with llama_server(binary, llamacpp.default_gguf(), SLOTS, N_CTX, threads) as url:
        yield "llama-server", url, "default"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument(
        "--upstream-threads", type=int, help="llama.cpp threads of the upstream (default: one per core)"
    )
    arguments = parser.parse_args()
    main(arguments.rounds, arguments.tokens, arguments.streams, arguments.upstream_threads)
