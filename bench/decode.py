"""Benchmark 1: single-stream decode rate and time to first token on the default GGUF — the engine called
directly (alone, and beside a second idle instance in its process), modelport in-process and over HTTP, and
llama.cpp's own llama-server — same threads and slots.

    .venv/bin/python -m bench.decode [--runs 5] [--tokens 128] [--model smollm2|gemma3-270m]
        [--stream-interval MS ...]  # another modelport server beside the first, at this stream_interval_ms
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import modelport
from bench import references
from bench.common import (
    MODELS,
    NO_EOS,
    STORY,
    BenchModel,
    Stream,
    bench_model,
    cpu_seconds,
    http_client,
    llama_server,
    machine,
    median,
    modelport_configured,
    rotated,
    stream_completion,
    table,
)
from modelport.engines import llamacpp
from modelport.settings import ModelConfig, Settings

CHAT = "smollm2-135m-instruct"
CONFIG = f'defaults = false\n[[models]]\nid = "{CHAT}"\nengine = "llamacpp"\n'
SLOTS, N_CTX = 8, 32768  # the engine's defaults, given to llama-server too


def config(model: BenchModel, interval: float | None = None) -> str:
    """The models.toml of a server of `model` alone (at this `stream_interval_ms`, else the default)."""
    paced = "" if interval is None else f"stream_interval_ms = {interval}\n"
    return (
        f'defaults = false\n[[models]]\nid = "{model.id}"\nengine = "llamacpp"\npath = "{model.gguf}"\n'
        f"{paced}"
    )


def engine_stream(server: Any, prompt: str, max_tokens: int, no_eos: dict[str, int] = NO_EOS) -> Stream:
    """xllamacpp's server called directly, as modelport's engine calls it, timing its callback."""
    times: list[float] = []

    def on_chunk(chunk: dict[str, Any]) -> bool:
        if any(c.get("text") for c in chunk.get("choices") or []):
            times.append(time.perf_counter())
        return False

    request = {
        "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "logit_bias": no_eos, "stream": True,
    }  # fmt: skip
    start = time.perf_counter()
    server.handle_completions(request, on_chunk)
    return Stream(times[0] - start, len(times), times[-1] - times[0])


Measure = Callable[[str], Awaitable[Stream]]


async def worker(case: str, tokens: int, model: BenchModel) -> None:
    """The engine, or modelport in-process, in a process of its own (a second llama.cpp instance in one
    process skews the first's timings): one stream per prompt read from stdin, one JSON line out."""
    if case.startswith("engine"):
        server = llamacpp.start_server(str(model.gguf))
        if case == "engine beside another":
            # A second instance, idle (a second model, or the one that scores prompts), used to make the
            # OpenMP runtime they share put the first's threads to sleep at every barrier.
            idle = llamacpp.start_server(str(model.gguf))  # noqa: F841
        one: Measure = lambda p: asyncio.to_thread(engine_stream, server, p, tokens, model.no_eos)  # noqa: E731
    else:
        given = ModelConfig(id=model.id, engine="llamacpp", path=str(model.gguf))  # type: ignore[call-arg]
        inprocess = modelport.AsyncOpenAI(settings=Settings(defaults=False, models=[given]))
        one = lambda p: stream_completion(inprocess, model.id, p, tokens, model.no_eos)  # noqa: E731
    print("ready", flush=True)
    for line in sys.stdin:
        print(json.dumps(dataclasses.asdict(await one(line.strip()))), flush=True)


@asynccontextmanager
async def worker_process(case: str, tokens: int, model: str) -> AsyncIterator[Measure]:
    command = [sys.executable, "-m", "bench.decode", "--case", case, "--tokens", str(tokens)]
    command += ["--model", model]
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdin
    assert process.stdout

    async def one(prompt: str) -> Stream:
        assert process.stdin
        assert process.stdout
        process.stdin.write(prompt.encode() + b"\n")
        await process.stdin.drain()
        return Stream(**json.loads(await process.stdout.readline()))

    while (await process.stdout.readline()).strip() != b"ready":
        pass
    try:
        yield one
    finally:
        process.stdin.close()
        await process.wait()


async def main(runs: int, tokens: int, name: str, intervals: list[float]) -> None:
    model = bench_model(name)
    print(
        f"# Single-stream decode, {model.gguf.name}, {tokens} tokens, median of {runs} interleaved rounds"
        f"\n\n{machine()}"
    )
    async with AsyncExitStack() as stack:
        cases: dict[str, Measure] = {
            "engine called directly (xllamacpp)": await stack.enter_async_context(
                worker_process("engine", tokens, name)
            ),
            "modelport in-process": await stack.enter_async_context(
                worker_process("in-process", tokens, name)
            ),
            "engine beside a second, idle instance": await stack.enter_async_context(
                worker_process("engine beside another", tokens, name)
            ),
        }
        serving_cpu: dict[str, float] = {}  # each modelport server's event-loop thread, over the rounds

        def over_http(case: str, interval: float | None) -> Measure:
            url, pid = stack.enter_context(modelport_configured(config(model, interval)))
            client = http_client(url)

            async def one(prompt: str) -> Stream:
                # The event loop's thread (the main one) does all of the server's Python work per chunk.
                before = cpu_seconds(pid, pid)
                stream = await stream_completion(client, model.id, prompt, tokens, model.no_eos)
                serving_cpu[case] = serving_cpu.get(case, 0.0) + cpu_seconds(pid, pid) - before
                return stream

            return one

        cases["modelport HTTP"] = over_http("modelport HTTP", None)
        for interval in intervals:
            case = f"modelport HTTP, stream_interval_ms {interval:g}"
            cases[case] = over_http(case, interval)
        binary = references.llama_server()
        if binary is None:
            print("\nllama-server: not built (python -m bench.references, ~25 min); its row is absent.")
        else:
            server = http_client(stack.enter_context(llama_server(binary, model.gguf, SLOTS, N_CTX)))
            cases["llama-server HTTP"] = lambda p: stream_completion(
                server, model.id, p, tokens, model.no_eos
            )
        # Round by round, every case once (`rotated`), so that a machine getting slower or faster affects
        # all alike, and every case the same prompt: with drafts, how fast an answer comes depends on what
        # it says (a prompt naming its case moved one case's rate against another's by up to 20%). Each case
        # is a server of its own, so none reuses another's prompt.
        results: dict[str, list[Stream]] = {name: [] for name in cases}
        for one in cases.values():
            await one(f"0. {STORY}")  # warm-up
        serving_cpu.clear()
        for i in range(runs):
            for name in rotated(list(cases), i):
                results[name].append(await cases[name](f"{i + 1}. {STORY}"))

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
    print()
    for case, spent in serving_cpu.items():
        chunks = sum(s.tokens for s in results[case])
        print(f"{case}: serving thread CPU {spent * 1000 / chunks:.3f} ms per streamed chunk")
    print(
        "\nTargets: HTTP decode ≥ 0.97× the engine and ≥ 1.0× llama-server; first token ≤ +2 ms over the "
        "engine; serving thread CPU ≤ 0.15 ms per chunk."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--model", choices=MODELS, default=MODELS[0])
    parser.add_argument(
        "--stream-interval",
        type=float,
        action="append",
        default=[],
        help="another modelport server, at this stream_interval_ms (0: each token at once); again for more",
    )
    cases = ["engine", "engine beside another", "in-process"]
    parser.add_argument("--case", choices=cases, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    threading.excepthook = lambda _: None  # xllamacpp's worker threads may complain at interpreter exit
    if arguments.case:
        asyncio.run(worker(arguments.case, arguments.tokens, bench_model(arguments.model)))
    else:
        asyncio.run(main(arguments.runs, arguments.tokens, arguments.model, arguments.stream_interval))
