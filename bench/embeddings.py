"""Benchmark 3: embeddings per second for batches of 1, 8 and 64 texts, and with 16 concurrent callers —
modelport over HTTP and in-process vs the ONNX Runtime model called directly.

    .venv/bin/python -m bench.embeddings [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import modelport
from bench.common import http_client, machine, modelport_server, table
from modelport.engines import onnx_embedding
from modelport.settings import ModelConfig, Settings

MODEL = "all-minilm-l6-v2"
CONFIG = f'defaults = false\n[[models]]\nid = "{MODEL}"\nengine = "onnx-embedding"\n'
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog"]
WORDS += ["while", "the", "sea", "keeps", "rolling", "under", "grey", "skies"]
TEXTS = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(12 + i % 9)) for i in range(64)]
LOADS = {1: TEXTS[:1], 8: TEXTS[:8], 64: TEXTS}


async def rate(call: Callable[[], Awaitable[Any]], texts_per_call: int, seconds: float) -> float:
    """Texts per second, calling again and again for `seconds` after a warm-up."""
    await call()
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        await call()
        done += texts_per_call
    return done / (time.perf_counter() - start)


async def measure(client: Any, seconds: float) -> dict[str, float]:
    out = {}
    for size, texts in LOADS.items():
        out[f"batch {size}"] = await rate(
            lambda t=texts: client.embeddings.create(model=MODEL, input=t), size, seconds
        )

    async def sixteen() -> None:
        await asyncio.gather(*(client.embeddings.create(model=MODEL, input=[t]) for t in TEXTS[:16]))

    out["16 callers × 1 text"] = await rate(sixteen, 16, seconds)
    return out


async def in_this_process(case: str, seconds: float) -> dict[str, float]:
    """ONNX Runtime directly, or modelport in-process; each in a process of its own, since two sessions in
    one process share its cores unevenly."""
    if case == "direct":
        (embed,) = onnx_embedding.load()
        out = {
            f"batch {size}": await rate(lambda t=texts: asyncio.to_thread(embed, t), size, seconds)
            for size, texts in LOADS.items()
        }
        # Without a server, 16 callers of one text each are 16 calls, one after another.
        out["16 callers × 1 text"] = out["batch 1"]
        return out
    settings = Settings(defaults=False, models=[ModelConfig(id=MODEL, engine="onnx-embedding")])
    async with modelport.AsyncOpenAI(settings=settings) as inprocess:
        return await measure(inprocess, seconds)


def in_a_process_of_its_own(case: str, seconds: float) -> dict[str, float]:
    command = [sys.executable, "-m", "bench.embeddings", "--case", case, "--seconds", str(seconds)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


async def main(seconds: float) -> None:
    print(f"# Embeddings per second, {MODEL}\n\n{machine()}")
    direct = in_a_process_of_its_own("direct", seconds)
    results = {
        "ONNX Runtime called directly": direct,
        "modelport in-process": in_a_process_of_its_own("in-process", seconds),
    }
    with modelport_server(CONFIG) as url:
        results["modelport HTTP"] = await measure(http_client(url), seconds)

    cases = list(direct)
    rows = [[name] + [values[c] for c in cases] for name, values in results.items()]
    rows += [
        [f"{name} × direct"] + [f"{values[c] / direct[c]:.2f}" for c in cases]
        for name, values in results.items()
        if values is not direct
    ]
    print(table("Texts per second", ["", *cases], rows))
    print("\nTarget: ≥ 0.95× ONNX Runtime called directly at batch 64.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--case", choices=["direct", "in-process"], help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.case:
        print(json.dumps(asyncio.run(in_this_process(arguments.case, arguments.seconds))))
    else:
        asyncio.run(main(arguments.seconds))
