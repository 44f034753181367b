"""Benchmark 3: embeddings per second for batches of 1, 8 and 64 texts, and with 16 concurrent callers —
modelport over HTTP and in-process vs the ONNX Runtime model called directly.

    .venv/bin/python -m bench.embeddings [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
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


async def rate(call: Callable[[], Awaitable[Any]], texts_per_call: int, seconds: float) -> float:
    """Texts per second, calling again and again for `seconds` after a warm-up."""
    await call()
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        await call()
        done += texts_per_call
    return done / (time.perf_counter() - start)


async def main(seconds: float) -> None:
    print(f"# Embeddings per second, {MODEL}\n\n{machine()}")
    (embed,) = onnx_embedding.load()
    loads = {1: TEXTS[:1], 8: TEXTS[:8], 64: TEXTS}
    results: dict[str, dict[str, float]] = {}

    direct: dict[str, float] = {}
    for size, texts in loads.items():
        direct[f"batch {size}"] = await rate(lambda t=texts: asyncio.to_thread(embed, t), size, seconds)
    # Without a server, 16 callers of one text each are 16 calls, one after another.
    direct["16 callers × 1 text"] = direct["batch 1"]
    results["ONNX Runtime called directly"] = direct

    async def measure(client: Any) -> dict[str, float]:
        out = {}
        for size, texts in loads.items():
            out[f"batch {size}"] = await rate(
                lambda t=texts: client.embeddings.create(model=MODEL, input=t), size, seconds
            )

        async def sixteen() -> None:
            await asyncio.gather(*(client.embeddings.create(model=MODEL, input=[t]) for t in TEXTS[:16]))

        out["16 callers × 1 text"] = await rate(sixteen, 16, seconds)
        return out

    settings = Settings(defaults=False, models=[ModelConfig(id=MODEL, engine="onnx-embedding")])
    async with modelport.AsyncOpenAI(settings=settings) as inprocess:
        results["modelport in-process"] = await measure(inprocess)
    with modelport_server(CONFIG) as url:
        results["modelport HTTP"] = await measure(http_client(url))

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
    asyncio.run(main(parser.parse_args().seconds))
