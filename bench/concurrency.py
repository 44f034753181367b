"""Benchmark 2: aggregate decode rate at 1, 4, 8 and 16 concurrent streams — modelport (8 slots) vs its
engine alone (`bench.engine`: what modelport adds, apart from what the engine's build costs) vs llama-server
with the same slots and shared KV cache, and with a cache per slot (its own default given `-np 8`), vs
llama-cpp-python's server. With `--documents`, each stream's prompt is its own ~2,000-token document first
(the rate then counts the prompts' reading too): concurrent long prompts, where a shared cache's attention
passes over the other streams' cells.

    .venv/bin/python -m bench.concurrency [--tokens 64] [--streams 1 4 8 16] [--speculative ngram-mod …]
        [--model smollm2|gemma3-270m] [--documents]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack

from bench import references, workload_data
from bench.common import (
    MODELS,
    NO_EOS,
    STORY,
    BenchModel,
    bench_model,
    http_client,
    llama_cpp_python_server,
    llama_server,
    machine,
    median,
    modelport_server,
    rotated,
    stream_completion,
    table,
)
from bench.decode import N_CTX, SLOTS, config
from bench.engine import engine_server

ENGINE = "modelport's engine alone"


async def aggregate(
    url: str,
    model: str,
    streams: int,
    tokens: int,
    no_eos: dict[str, int] = NO_EOS,
    label: str = "0",
    documents: list[str] | None = None,
) -> tuple[float, float]:
    """Tokens per second over all streams (first request sent to last token), and the slowest stream's
    time over the fastest's; the end tokens barred by `no_eos` (SmolLM2's by default). The prompts carry
    `label`: every server gets the same prompts in a round, and none of an earlier round's. A prompt sent
    again is a cache's matter, which each server keeps differently (llama-server's slot holds the last
    prompt; modelport keeps a lone prompt from its second sending on): with the same prompts every round,
    modelport's first counted round was that second sending, 20-30% slower than its later rounds. With
    `documents`, stream i's prompt begins with documents[i]."""
    # A connection of its own for every request: llama.cpp's HTTP listener (llama-server's, and the engine
    # alone's) now and then closed a kept-alive connection as the next request went out on it ("Server
    # disconnected without sending a response"), which ended the whole run.
    async with http_client(url) as client:
        await stream_completion(client, model, f"{label}.0. {STORY}", 4, no_eos)  # warm-up
    start = time.perf_counter()

    async def one(i: int) -> tuple[int, float]:
        prompt = f"{label}.{i + 1}. {documents[i]}\n\n{STORY}" if documents else f"{label}.{i + 1}. {STORY}"
        async with http_client(url) as client:
            result = await stream_completion(client, model, prompt, tokens, no_eos)
        return result.tokens, time.perf_counter() - start

    results = await asyncio.gather(*(one(i) for i in range(streams)))
    wall = max(end for _, end in results)
    return sum(n for n, _ in results) / wall, wall / min(end for _, end in results)


def servers(
    model: BenchModel, speculation: list[str]
) -> Iterator[tuple[str, Callable[[], AbstractContextManager[str]]]]:
    served, gguf = config(model), model.gguf
    yield "modelport HTTP", lambda: modelport_server(served)
    yield ENGINE, lambda: engine_server(gguf)
    binary = references.llama_server()
    if binary is None:
        print("\nllama-server: not built (python -m bench.references); its column is absent.")
    else:
        yield f"llama-server ({SLOTS} slots)", lambda: llama_server(binary, gguf, SLOTS, N_CTX)
        yield (
            f"llama-server ({SLOTS} slots, a cache each)",
            lambda: llama_server(binary, gguf, SLOTS, N_CTX, extra=["--no-kv-unified"]),
        )
    python = references.llama_cpp_python()
    if python is None:
        print("\nllama-cpp-python: not built (python -m bench.references); its column is absent.")
    else:
        yield "llama-cpp-python server", lambda: llama_cpp_python_server(python, gguf, 8192)
    for kind in speculation:  # modelport with another speculation than its default, to compare
        yield (
            f"modelport speculative={kind}",
            lambda kind=kind: modelport_server(f'{served}speculative = "{kind}"\n'),
        )


def main(
    counts: list[int], tokens: int, rounds: int, speculation: list[str], name: str, documents: bool = False
) -> None:
    model = bench_model(name)
    papers = [text for text, _ in workload_data.documents(max(counts))] if documents else None
    behind = ", each behind its own ~2,000-token document" if documents else ""
    title = f"# Aggregate decode, {model.gguf.name}, {tokens} tokens a stream{behind}"
    print(f"{title}, median of {rounds} interleaved rounds\n\n{machine()}")
    with ExitStack() as stack:
        urls = {name: stack.enter_context(start()) for name, start in servers(model, speculation)}
        # Round by round, every server in turn (`rotated`), so that the machine's drift affects all alike.
        samples: dict[str, dict[int, list[tuple[float, float]]]] = {n: defaultdict(list) for n in urls}

        def measured(name: str, count: int, round_: int) -> tuple[float, float]:
            try:
                label = f"{count}.{round_}"
                return asyncio.run(
                    aggregate(urls[name], model.id, count, tokens, model.no_eos, label, papers)
                )
            except Exception as error:  # a dropped connection says nothing of whose it was
                said = f"round {round_}" if round_ else "the round not counted"
                raise RuntimeError(f"{name}, {count} streams, {said}: {error!r}") from error

        for count in counts:
            # A round not counted: each server's first batch of this many streams was seen up to 40% slower
            # than the next on every server (buffers sized for the larger batch, the VM's clock).
            for name in urls:
                measured(name, count, 0)
            for round_ in range(rounds):
                for name in rotated(list(urls), round_):
                    samples[name][count].append(measured(name, count, round_ + 1))
    rates = {
        name: {
            count: (median([r for r, _ in runs]), median([s for _, s in runs])) for count, runs in by.items()
        }
        for name, by in samples.items()
    }
    names = list(rates)
    headers = ["streams"] + [f"{n} tok/s (slowest/fastest)" for n in names]
    headers += [f"modelport × {n}" for n in names[1:]]
    others = names[2:]  # the reference servers
    headers += [f"engine alone × {n}" for n in others]
    rows = []
    for count in counts:
        row: list[object] = [count]
        row += [f"{rates[n][count][0]:.1f} ({rates[n][count][1]:.2f})" for n in names]
        row += [f"{rates[names[0]][count][0] / rates[n][count][0]:.2f}" for n in names[1:]]
        row += [f"{rates[ENGINE][count][0] / rates[n][count][0]:.2f}" for n in others]
        rows.append(row)
    print(table("Aggregate tokens/s", headers, rows))
    spreads = [
        [
            count,
            *(
                f"{max(r for r, _ in samples[n][count]) / min(r for r, _ in samples[n][count]):.2f}"
                for n in names
            ),
        ]
        for count in counts
    ]
    print(table("Spread over the rounds (fastest round ÷ slowest)", ["streams", *names], spreads))
    for count in counts:
        for name in names:
            rounds = ", ".join(f"{r:.1f}" for r, _ in samples[name][count])
            print(f"{count} streams, {name}, round by round: {rounds}")
    print("\nTargets at 8 streams: ≥ 1.0× llama-server with 8 slots, ≥ 2× llama-cpp-python's server.")
    print(
        "Every server bans the end tokens with logit_bias; llama-cpp-python applies it in Python per token."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--speculative", nargs="+", default=[], metavar="KIND", help="also modelport with these speculations"
    )
    parser.add_argument("--model", choices=MODELS, default=MODELS[0])
    parser.add_argument(
        "--documents", action="store_true", help="each stream's prompt behind its own ~2,000-token document"
    )
    arguments = parser.parse_args()
    main(
        arguments.streams,
        arguments.tokens,
        arguments.rounds,
        arguments.speculative,
        arguments.model,
        arguments.documents,
    )
