"""Benchmark: vector stores. The embedding model's own rate (chunks of 254 tokens through
all-MiniLM-L6-v2, the default) is measured apart; the store's ingest rate (chunks written with their
vectors and full-text index, in the same batches the ingest writes) and hybrid search latency (p50/p95,
the embedding search plus the full-text search, fused) are measured at 10k and 100k chunks on SQLite and
on PostgreSQL with pgvector. The bulk of the vectors are the measured ones with noise added, so the
benchmark does not spend an hour embedding. Reference, in the same run: an exact top-k by a matrix
product over the same vectors already in memory (the floor any exact search pays).

    .venv/bin/python -m bench.vector_stores [--sizes 10000 100000] [--searches 200]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

import numpy as np

from bench.common import machine, median, scratch, table
from modelport.engines.onnx_embedding import load
from modelport.service.vectors.search import hybrid
from modelport.store import Store
from tests.support.postgres import Postgres, postgres_binaries

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "ve", "da", "gu", "fe", "ho", "ji", "zu", "be"]
# Prose-like text: English function words (which searches leave out) and 8000 made-up content words drawn
# by Zipf's law past its head (the head of real prose is the function words): a query's rarer words match
# a few chunks, its common ones many.
FUNCTION_WORDS = "the of and to in a is that for it as with was on be by this are from at or"
FUNCTION = FUNCTION_WORDS.split()
WORDS = sorted({"".join(random.Random(i).choices(SYLLABLES, k=3 + i % 3)) for i in range(8000)})
WEIGHTS = [1 / (rank + 50) for rank in range(len(WORDS))]
BATCH = 64  # chunks per write, as the ingest writes them (one embedding batch)


def sentences(count: int, rng: random.Random) -> list[str]:
    """Chunks of prose-like text, about 254 tokens each."""
    return [
        " ".join(
            rng.choice(FUNCTION) if rng.random() < 0.4 else rng.choices(WORDS, WEIGHTS)[0] for _ in range(180)
        )
        for _ in range(count)
    ]


def embedding_rate(texts: list[str]) -> tuple[float, np.ndarray]:
    """Chunks per second through the default embedding model, and the vectors it made."""
    model = load()[0]
    model(texts[:8])  # warm-up
    start = time.perf_counter()
    vectors = np.concatenate([model(texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)])
    return len(texts) / (time.perf_counter() - start), vectors


async def measure(url: str, size: int, texts: list[str], seeds: np.ndarray, searches: int) -> list[object]:
    """Ingest rate (chunks/s) and search p50/p95 (ms) at `size` chunks, and the in-memory reference."""
    store = Store(url)
    await store.open()
    rows = store.vectors
    store_id = f"vs_bench_{size}"
    now = int(time.time())
    await rows.create(
        {"id": store_id, "created": now, "name": None, "description": None, "metadata": {},
         "model": "all-minilm-l6-v2", "expires_after": None, "expires_at": None, "last_active": now,
         "version": 0, "project": "proj_default"}
    )  # fmt: skip
    rng = np.random.default_rng(0)
    matrix = np.empty((size, seeds.shape[1]), np.float32)
    files = []
    start = time.perf_counter()
    for first in range(0, size, BATCH * 16):  # a "file" of 16 batches at a time, as one ingest writes it
        count = min(BATCH * 16, size - first)
        picks = rng.integers(0, len(seeds), count)
        vectors = seeds[picks] + rng.normal(0, 0.05, (count, seeds.shape[1])).astype(np.float32)
        matrix[first : first + count] = vectors
        file_id = f"file-{first}"
        files.append(file_id)
        chunk_texts = [texts[i % len(texts)] for i in picks]
        await rows.attach(
            [{"vector_store_id": store_id, "id": file_id, "created": now, "status": "in_progress",
              "last_error": None, "attributes": {}, "chunking": {}, "usage_bytes": 0, "batch_id": None,
              "heartbeat": None, "project": "proj_default"}]
        )  # fmt: skip
        await store.chunks.complete(store_id, file_id, list(zip(chunk_texts, vectors, strict=True)), 0)
    ingest = size / (time.perf_counter() - start)
    queries = [
        (" ".join(random.Random(i).choices(WORDS, WEIGHTS, k=5)), seeds[i % len(seeds)])
        for i in range(searches)
    ]
    cold_start = time.perf_counter()
    await hybrid(store.chunks, store_id, [queries[0]], None, 10, -1.0)
    cold = (time.perf_counter() - cold_start) * 1000
    timings: list[float] = []
    filtered: list[float] = []
    half = files[::2]  # a filter on attributes that half the files pass
    for query in queries:
        for chosen, into in ((None, timings), (half, filtered)):
            began = time.perf_counter()
            await hybrid(store.chunks, store_id, [query], chosen, 10, -1.0)
            into.append((time.perf_counter() - began) * 1000)
    normed = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    floor = []
    for _, vector in queries:
        began = time.perf_counter()
        scores = normed @ (vector / np.linalg.norm(vector))
        np.argpartition(-scores, 10)[:10]
        floor.append((time.perf_counter() - began) * 1000)
    await store.close()
    p50, p95 = median(timings), float(np.percentile(timings, 95))
    return [size, round(ingest), cold, p50, p95, median(filtered), median(floor), p50 / median(floor)]


def main(sizes: list[int], searches: int) -> None:
    print(f"# Vector stores: ingest and hybrid search\n\n{machine()}")
    rng = random.Random(0)
    texts = sentences(512, rng)
    rate, seeds = embedding_rate(texts)
    print(table("Embedding (all-MiniLM-L6-v2, 254-token chunks)", ["chunks/s"], [[rate]]))
    for size in sizes:
        print(f"\nAt {size} chunks, embedding them would take {size / rate / 60:.1f} min on this machine.")
    headers = [
        "chunks", "ingest chunks/s", "first search ms", "search p50 ms", "p95 ms",
        "p50 ms, half the files filtered", "reference ms (numpy top-10)", "p50 / reference",
    ]  # fmt: skip
    folder = scratch("vectors")
    rows = [asyncio.run(measure(str(folder / f"s{size}.db"), size, texts, seeds, searches)) for size in sizes]
    print(table("SQLite (vectors scanned in memory, FTS5)", headers, rows))
    binaries = postgres_binaries()
    if binaries is None:
        print("\nPostgreSQL is not installed (apt-get install postgresql): its table is absent.")
        return
    server = Postgres(binaries, durable=True)
    try:
        rows = [asyncio.run(measure(server.database(), size, texts, seeds, searches)) for size in sizes]
    finally:
        server.stop()
    print(table("PostgreSQL 15 + pgvector (exact cosine scan, tsvector)", headers, rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--searches", type=int, default=200)
    arguments = parser.parse_args()
    main(arguments.sizes, arguments.searches)
