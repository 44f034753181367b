"""Benchmark: the cost of state. Time to first token of a chat stream with `store: true` against the same
stream without (interleaved rounds, one server), and the latency of listing stored chat completions with
100k rows, on SQLite and on PostgreSQL (started here when it is installed).

    .venv/bin/python -m bench.state [--rounds 30] [--rows 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any

from sqlalchemy import insert

from bench.common import NO_EOS, config_file, http_client, machine, median, modelport_process, scratch, table
from modelport.store import Store
from modelport.store.tables import chat_completion_metadata, chat_completions
from tests.support.postgres import Postgres, postgres_binaries

CHAT = "smollm2-135m-instruct"
CONFIG = f'defaults = false\n[[models]]\nid = "{CHAT}"\nengine = "llamacpp"\n'


async def first_token(url: str, store: bool, index: int) -> tuple[float, float]:
    """Seconds to the first streamed token and to the end, for one request."""
    client = http_client(url)
    start = time.perf_counter()
    first = 0.0
    stream = await client.chat.completions.create(
        model=CHAT,
        messages=[{"role": "user", "content": f"{index}. Say something."}],
        max_tokens=16,
        logit_bias=NO_EOS,
        stream=True,
        store=store,
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content and not first:
            first = time.perf_counter() - start
    end = time.perf_counter() - start
    await client.close()
    return first, end


def measure_ttft(rounds: int, database: str) -> list[list[object]]:
    samples: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with (
        config_file(CONFIG) as config,
        modelport_process("--config", config, "--database", database) as (url, _),
    ):
        asyncio.run(first_token(url, True, -1))  # warm-up, and the store's first write
        for r in range(rounds):
            for store in (False, True):  # every prompt new: none is served from the prompt cache
                samples[store].append(asyncio.run(first_token(url, store, 2 * r + store)))
    rows: list[list[object]] = []
    for store in (False, True):
        firsts = [f * 1000 for f, _ in samples[store]]
        ends = [e * 1000 for _, e in samples[store]]
        rows.append([f"store: {str(store).lower()}", median(firsts), median(ends)])
    (_, first_off, end_off), (_, first_on, end_on) = rows
    rows[1] += [f"{float(first_on) - float(first_off):+.2f}", f"{float(end_on) - float(end_off):+.2f}"]  # type: ignore[arg-type]
    rows[0] += ["", ""]
    return rows


async def fill(store: Store, rows: int) -> list[str]:
    """`rows` stored completions, 100 per second of `created`, 3 models, 2 metadata keys each."""
    await store.open()
    ids = []
    batch: list[dict[str, Any]] = []
    tags: list[dict[str, Any]] = []
    for i in range(rows):
        completion_id = f"chatcmpl-{i:08d}"
        ids.append(completion_id)
        metadata = {"user": f"u{i % 1000}", "topic": f"t{i % 7}"}
        batch.append(
            {
                "id": completion_id,
                "created": 1_700_000_000 + i // 100,
                "model": f"model-{i % 3}",
                "status": "completed",
                "metadata": metadata,
                "request": {"messages": [{"role": "user", "content": f"question {i}"}]},
                "completion": {"id": completion_id, "object": "chat.completion", "choices": []},
            }
        )
        tags += [{"completion_id": completion_id, "key": k, "value": v} for k, v in metadata.items()]
        if len(batch) == 5000 or i == rows - 1:
            async with store.database.transaction() as connection:
                await connection.execute(insert(chat_completions), batch)
                await connection.execute(insert(chat_completion_metadata), tags)
            batch, tags = [], []
    return ids


async def timed(call: Callable[[], Coroutine[Any, Any, Any]], repeat: int) -> float:
    """Median milliseconds of `repeat` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def list_latency(url: str, rows: int, repeat: int) -> list[float]:
    store = Store(url)
    ids = await fill(store, rows)
    middle = ids[rows // 2]
    pick = random.Random(3)
    completions = store.completions
    cases = [
        lambda: completions.list_page(after=None, limit=20, order="asc", model=None, metadata={}),
        lambda: completions.list_page(after=None, limit=20, order="desc", model=None, metadata={}),
        lambda: completions.list_page(after=middle, limit=20, order="asc", model=None, metadata={}),
        lambda: completions.list_page(after=None, limit=20, order="desc", model="model-1", metadata={}),
        lambda: completions.list_page(
            after=None, limit=20, order="desc", model=None, metadata={"user": f"u{pick.randrange(1000)}"}
        ),
        lambda: completions.get(ids[pick.randrange(rows)]),
    ]
    result = [await timed(case, repeat) for case in cases]
    await store.close()
    return result


CASES = [
    "first page (20, oldest first)",
    "first page, newest first",
    "a page after row 50 000",
    "model filter",
    "metadata filter (1 in 1000)",
    "retrieve one",
]


def main(rounds: int, rows: int, repeat: int) -> None:
    print(f"# The cost of state\n\n{machine()}")
    folder = scratch("state")
    ttft = measure_ttft(rounds, str(folder / "ttft.db"))
    print(
        table(
            f"Chat stream, 16 tokens, median of {rounds} interleaved rounds (SQLite)",
            ["request", "first token ms", "whole answer ms", "first token +ms", "whole answer +ms"],
            ttft,
        )
    )
    print("Target: time to first token with store ≤ +2 ms (the row is written once, before [DONE]).")
    columns = {"SQLite": asyncio.run(list_latency(str(folder / "list.db"), rows, repeat))}
    binaries = postgres_binaries()
    if binaries is None:
        print("\nPostgreSQL is not installed (apt-get install postgresql): its column is absent.")
    else:
        server = Postgres(binaries, durable=True)
        try:
            columns["PostgreSQL"] = asyncio.run(list_latency(server.database(), rows, repeat))
        finally:
            server.stop()
    names = list(columns)
    body = [[case, *(columns[n][i] for n in names)] for i, case in enumerate(CASES)]
    print(
        table(
            f"Stored chat completions, {rows} rows: ms per call, median of {repeat}", ["call", *names], body
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=50)
    arguments = parser.parse_args()
    main(arguments.rounds, arguments.rows, arguments.repeat)
