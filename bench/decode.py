"""Benchmark 1: single-stream decode rate and time to first token on the default GGUF — the engine called
directly, modelport in-process and over HTTP, and llama.cpp's own llama-server — same threads and slots.

    .venv/bin/python -m bench.decode [--runs 5] [--tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import modelport
from bench import references
from bench.common import (
    NO_EOS,
    STORY,
    Stream,
    http_client,
    llama_server,
    machine,
    median,
    modelport_server,
    stream_completion,
    table,
)
from modelport.engines import llamacpp
from modelport.settings import ModelConfig, Settings

CHAT = "smollm2-135m-instruct"
CONFIG = f'defaults = false\n[[models]]\nid = "{CHAT}"\nengine = "llamacpp"\n'
SLOTS, N_CTX = 8, 32768  # the engine's defaults, given to llama-server too


def engine_stream(server: Any, prompt: str, max_tokens: int) -> Stream:
    """xllamacpp's server called directly, as modelport's engine calls it, timing its callback."""
    times: list[float] = []

    def on_chunk(chunk: dict[str, Any]) -> bool:
        if any(c.get("text") for c in chunk.get("choices") or []):
            times.append(time.perf_counter())
        return False

    request = {
        "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "logit_bias": NO_EOS, "stream": True,
    }  # fmt: skip
    start = time.perf_counter()
    server.handle_completions(request, on_chunk)
    return Stream(times[0] - start, len(times), times[-1] - times[0])


async def measure(runs: int, one: Callable[[str], Any]) -> list[Stream]:
    await one(f"0. {STORY}")  # warm-up
    return [await one(f"{i + 1}. {STORY}") for i in range(runs)]


async def main(runs: int, tokens: int) -> None:
    print(f"# Single-stream decode, {tokens} tokens, median of {runs}\n\n{machine()}")
    results: dict[str, list[Stream]] = {}

    server = llamacpp.start_server()
    results["engine called directly (xllamacpp)"] = await measure(
        runs, lambda p: asyncio.to_thread(engine_stream, server, p, tokens)
    )

    settings = Settings(defaults=False, models=[ModelConfig(id=CHAT, engine="llamacpp")])
    async with modelport.AsyncOpenAI(settings=settings) as inprocess:
        results["modelport in-process"] = await measure(
            runs, lambda p: stream_completion(inprocess, CHAT, p, tokens)
        )

    with modelport_server(CONFIG) as url:
        client = http_client(url)
        results["modelport HTTP"] = await measure(runs, lambda p: stream_completion(client, CHAT, p, tokens))

    binary = references.llama_server()
    if binary is None:
        print("\nllama-server: not built (python -m bench.references builds it, ~15 min); its row is absent.")
    else:
        with llama_server(binary, llamacpp.default_gguf(), SLOTS, N_CTX) as url:
            client = http_client(url)
            results["llama-server HTTP"] = await measure(
                runs, lambda p: stream_completion(client, CHAT, p, tokens)
            )

    engine = results["engine called directly (xllamacpp)"]
    engine_rate = median([s.tokens_per_second for s in engine])
    engine_first = median([s.first_token for s in engine])
    server_rate = median([s.tokens_per_second for s in results.get("llama-server HTTP", [])])
    rows = []
    for name, streams in results.items():
        rate = median([s.tokens_per_second for s in streams])
        first = median([s.first_token for s in streams])
        rows.append(
            [
                name,
                first * 1000,
                (first - engine_first) * 1000,
                rate,
                f"{rate / engine_rate:.3f}",
                f"{rate / server_rate:.3f}" if server_rate == server_rate else "—",
            ]
        )
    headers = ["", "first token ms", "+ms vs engine", "decode tok/s", "× engine", "× llama-server"]
    print(table("Single stream", headers, rows))
    print(
        "\nTargets: decode ≥ 0.95× the engine and ≥ 0.95× llama-server; first token ≤ +5 ms over the engine."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    arguments = parser.parse_args()
    threading.excepthook = lambda _: None  # xllamacpp's worker threads may complain at interpreter exit
    asyncio.run(main(arguments.runs, arguments.tokens))
