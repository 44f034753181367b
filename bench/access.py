"""Benchmark: what projects and keys cost a request. In this process, the key check (cached), the rate
limit check and the usage record, per call; over HTTP, the latency of `GET /v1/models` and of a tiny
chat completion with a stored key, project limits and usage recording, against the same server with no
keys (measured in the same run, requests interleaved).

    .venv/bin/python -m bench.access [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import time

import httpx

from bench.common import machine, median, modelport_process, scratch, table
from modelport.cli import main as cli
from modelport.context import RequestContext
from modelport.metrics import Tally
from modelport.service.access import Access
from modelport.settings import Settings
from modelport.store import Store

CONFIG = """defaults = false
[[models]]
id = "reverse"
predictor = "tests.predictors.tiny_models:reverse_chat"
"""
CHAT = {"model": "reverse", "messages": [{"role": "user", "content": "one two three"}]}


async def per_call(calls: int) -> list[list[object]]:
    """Microseconds per key check, rate-limit admission and usage record."""
    folder = scratch("access")
    settings = Settings(defaults=False, store={"url": str(folder / "state.db")})
    store = Store(settings.store.resolved_url() or "")
    access = Access(store, settings)
    await access.admin.create_project("bench", {"rpm": 10**9, "tpm": 10**12})
    key = (await access.admin.create_key("bench"))["value"]
    principal = await access.identify(f"Bearer {key}")
    assert principal is not None
    request = RequestContext(project=principal.project, key_id=principal.key_id, limits=principal.limits)
    tally = Tally(input_tokens=10, output_tokens=10)

    async def timed_identify() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            await access.identify(f"Bearer {key}")
        return (time.perf_counter() - start) / calls * 1e6

    def timed(step: str) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            if step == "admit":
                access.quotas.admit(request, "reverse")
            else:
                access.meter.record(request, "reverse", "completions", tally)
        return (time.perf_counter() - start) / calls * 1e6

    rows: list[list[object]] = [
        ["key check (cached), identify()", await timed_identify()],
        ["rate limits, 2 limits (admit)", timed("admit")],
        ["usage record (in memory; written in batches)", timed("record")],
    ]
    start = time.perf_counter()
    await access.meter.flush()
    rows.append([f"usage flush of {calls} records in one minute row", (time.perf_counter() - start) * 1e6])
    await access.close()
    await store.close()
    return rows


async def latencies(url: str, key: str | None, requests: int) -> dict[str, list[float]]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    found: dict[str, list[float]] = {"GET /v1/models": [], "chat completion": []}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        for _ in range(requests):
            for what in found:
                start = time.perf_counter()
                if what == "chat completion":
                    answer = await client.post("/v1/chat/completions", json=CHAT)
                else:
                    answer = await client.get("/v1/models")
                answer.raise_for_status()
                found[what].append((time.perf_counter() - start) * 1000)
    return found


def over_http(requests: int) -> list[list[object]]:
    folder = scratch("access")
    config = folder / "models.toml"
    config.write_text(CONFIG)
    keyed_db = str(folder / "keyed.db")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        cli(
            ["projects", "create", "bench", "--rpm", str(10**9), "--tpm", str(10**12), "--database", keyed_db]
        )
        cli(["keys", "create", "--project", "bench", "--database", keyed_db])
    key = printed.getvalue().splitlines()[-1]
    with (
        modelport_process("--config", str(config), "--database", str(folder / "open.db")) as (open_url, _),
        modelport_process("--config", str(config), "--database", keyed_db) as (keyed_url, _),
    ):
        asyncio.run(latencies(open_url, None, 50))  # warm-up
        asyncio.run(latencies(keyed_url, key, 50))
        results: dict[str, dict[str, list[float]]] = {
            name: {"GET /v1/models": [], "chat completion": []} for name in ("open", "keyed")
        }
        for _ in range(10):  # interleaved rounds: drift hits both alike
            for name, url, given in (("open", open_url, None), ("keyed", keyed_url, key)):
                for what, values in asyncio.run(latencies(url, given, requests // 10)).items():
                    results[name][what] += values
    rows: list[list[object]] = []
    for what in ("GET /v1/models", "chat completion"):
        plain, keyed = median(results["open"][what]), median(results["keyed"][what])
        rows.append([what, plain, keyed, keyed - plain, keyed / plain])
    return rows


def main(requests: int) -> None:
    print(f"# What projects and keys cost a request\n\n{machine()}")
    print(table("Per call, in this process (µs)", ["step", "µs"], asyncio.run(per_call(20_000))))
    print(
        table(
            f"Over HTTP, p50 of {requests} sequential requests each (ms)",
            ["request", "no keys", "stored key + limits + usage", "added", "ratio"],
            over_http(requests),
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    main(parser.parse_args().requests)
