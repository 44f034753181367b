"""Benchmark: llama.cpp built for this CPU against PyPI's portable build — whether greedy answers change
between the builds beyond what batching already changes them, and what each decodes.

    .venv/bin/python -m bench.builds [--tokens 128]

modelport serves the same prompts (free-chat questions and code edits) greedily on each build, once one at a
time and once 8 at once (a fresh server for each pass, so no pass reuses another's cached prompts), and
every pass is compared with the portable build one at a time: how many answers are identical, and where
the first difference falls in the others. Differences within one build between the passes are what
batching does (the sums of a batch of 8 round differently from those of one); the builds' difference
should be no larger. Needs `modelport engine build` first.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench import workload_data
from bench.common import http_client, machine, modelport_server, table
from bench.decode import CHAT, CONFIG
from bench.workload import on_the_wheel
from modelport.engines.llamacpp import cpu_builds

PASSES = [("portable", 1), ("portable", 8), ("built", 1), ("built", 8)]


def prompts() -> list[str]:
    source = workload_data.source_file()
    names = [workload_data.function_name(source, i) for i in range(4)]
    edits = [
        f"Rename the function {n} to renamed_{n}. Return the whole file.\n\n```python\n{source}```"
        for n in names
    ]
    return [*workload_data.QUESTIONS, *edits]


async def answers(url: str, asks: list[str], tokens: int, together: int) -> tuple[list[str], float]:
    """Each prompt's greedy answer, `together` at a time; and the tokens per second of the pass."""
    client = http_client(url, 0)
    gate = asyncio.Semaphore(together)
    made = 0

    async def one(ask: str) -> str:
        nonlocal made
        async with gate:
            reply = await client.chat.completions.create(
                model=CHAT, messages=[{"role": "user", "content": ask}], max_tokens=tokens, temperature=0
            )
        made += reply.usage.completion_tokens if reply.usage else 0
        return reply.choices[0].message.content or ""

    start = time.perf_counter()
    texts = await asyncio.gather(*(one(ask) for ask in asks))
    seconds = time.perf_counter() - start
    await client.close()
    return list(texts), made / seconds


def shared_prefix(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def main(tokens: int) -> None:
    if cpu_builds.ready() is None:
        raise SystemExit("this CPU has no llama.cpp build: run `modelport engine build` first")
    asks = prompts()
    print(f"# Greedy answers on each llama.cpp build\n\n{machine()}\n\n{len(asks)} prompts, {tokens} tokens")
    results: dict[tuple[str, int], tuple[list[str], float]] = {}
    for build, together in PASSES:
        # main() has made sure this CPU's build exists: a server at its defaults runs it.
        served = on_the_wheel(CONFIG) if build == "portable" else modelport_server(CONFIG)
        with served as url:
            asyncio.run(answers(url, ["Hello"], 8, 1))  # page faults paid before the pass
            results[(build, together)] = asyncio.run(answers(url, asks, tokens, together))
        print(f"  {build}, {together} at once: {results[(build, together)][1]:.1f} tok/s", flush=True)
    reference = results[("portable", 1)][0]
    rows = []
    for (build, together), (texts, rate) in results.items():
        differing = [shared_prefix(a, b) for a, b in zip(reference, texts, strict=True) if a != b]
        first = f"{statistics.median(differing):.0f} (min {min(differing)})" if differing else "-"
        rows.append(
            [f"{build}, {together} at once", f"{len(texts) - len(differing)}/{len(texts)}", first, rate]
        )
    headers = ["pass", "identical to portable, one at a time", "first difference at char (median)", "tok/s"]
    print(table("Greedy answers against the portable build one at a time", headers, rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128, help="tokens per answer")
    main(parser.parse_args().tokens)
