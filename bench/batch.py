"""Benchmark: batches beside live traffic. An interactive chat's time to first token when idle and while a
500-line chat batch runs, and the batch's throughput against the same requests sent by 8 concurrent
clients, on one server.

    .venv/bin/python -m bench.batch [--lines 500] [--tokens 32] [--probes 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from typing import Any

import openai

from bench.common import NO_EOS, http_client, machine, median, modelport_process, table

CHAT = "smollm2-135m-instruct"
CONFIG = f'defaults = false\n[[models]]\nid = "{CHAT}"\nengine = "llamacpp"\n'


def body(i: int, tokens: int) -> dict[str, Any]:
    return {
        "model": CHAT,
        "messages": [{"role": "user", "content": f"{i}. Write about the sea."}],
        "max_tokens": tokens,
        "logit_bias": NO_EOS,
    }


async def first_token(client: openai.AsyncOpenAI, i: int) -> float:
    start = time.perf_counter()
    stream = await client.chat.completions.create(
        model=CHAT,
        messages=[{"role": "user", "content": f"probe {i}: say hello"}],
        max_tokens=4,
        logit_bias=NO_EOS,
        stream=True,
    )
    first = 0.0
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content and not first:
            first = time.perf_counter() - start
    return first


async def probes(url: str, count: int, pause: float) -> list[float]:
    client = http_client(url)
    times = []
    for i in range(count):
        times.append(await first_token(client, i))
        await asyncio.sleep(pause)
    await client.close()
    return times


async def concurrent(url: str, lines: int, tokens: int, clients: int) -> float:
    """Seconds for `clients` concurrent clients to send every request."""
    client = http_client(url)
    queue = list(range(lines))
    start = time.perf_counter()

    async def worker() -> None:
        while queue:
            i = queue.pop()
            await client.chat.completions.create(**body(10_000 + i, tokens))

    await asyncio.gather(*(worker() for _ in range(clients)))
    await client.close()
    return time.perf_counter() - start


async def batch_run(url: str, lines: int, tokens: int, probe_count: int) -> tuple[float, list[float]]:
    """Seconds the batch took, and interactive first-token times measured while it ran."""
    client = http_client(url)
    requests = [
        {"custom_id": f"l{i}", "method": "POST", "url": "/v1/chat/completions", "body": body(i, tokens)}
        for i in range(lines)
    ]
    content = b"".join(json.dumps(request).encode() + b"\n" for request in requests)
    uploaded = await client.files.create(file=("bench.jsonl", content), purpose="batch")
    start = time.perf_counter()
    batch = await client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    while True:  # the probes begin once the batch is in full swing
        if (await client.batches.retrieve(batch.id)).request_counts.completed >= 8:
            break
        await asyncio.sleep(0.1)
    during = await probes(url, probe_count, 0.3)
    while True:
        state = await client.batches.retrieve(batch.id)
        if state.status in ("completed", "failed", "cancelled"):
            break
        await asyncio.sleep(0.2)
    elapsed = time.perf_counter() - start
    assert state.request_counts.completed == lines, state.request_counts
    await client.close()
    return elapsed, during


def main(lines: int, tokens: int, probe_count: int, share: float | None) -> None:
    print(f"# Batches beside live traffic: {lines} chat lines of {tokens} tokens\n\n{machine()}")
    if share is not None:
        print(f"[batches] share = {share}")
    with tempfile.TemporaryDirectory() as folder:
        config = f"{folder}/models.toml"
        with open(config, "w") as file:
            file.write(CONFIG if share is None else f"{CONFIG}\n[batches]\nshare = {share}\n")
        with modelport_process("--config", config, "--database", f"{folder}/state.db") as (url, _):
            asyncio.run(probes(url, 3, 0))  # warm-up
            idle = asyncio.run(probes(url, probe_count, 0.3))
            batch_seconds, during = asyncio.run(batch_run(url, lines, tokens, probe_count))
            clients_seconds = asyncio.run(concurrent(url, lines, tokens, 8))
    ttft = [
        ["idle", median(idle) * 1000, ""],
        ["while the batch runs", median(during) * 1000, f"{median(during) / median(idle):.2f}×"],
    ]
    print(table(f"Interactive time to first token, median of {probe_count}", ["when", "ms", "× idle"], ttft))
    print("Target: ≤ 1.5× idle.")
    rate = [
        ["the batch", lines / batch_seconds, lines * tokens / batch_seconds, ""],
        ["8 concurrent clients", lines / clients_seconds, lines * tokens / clients_seconds, ""],
    ]
    rate[0][3] = f"{clients_seconds / batch_seconds:.2f}×"
    print(table("Throughput", ["how", "requests/s", "tokens/s", "batch × clients"], rate))
    print("Target: the batch ≥ 0.8× the 8 clients (it takes at most its share of the model's slots).")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument(
        "--share", type=float, help="[batches] share: of a model's slots, what a batch may take"
    )
    arguments = parser.parse_args()
    main(arguments.lines, arguments.tokens, arguments.probes, arguments.share)
