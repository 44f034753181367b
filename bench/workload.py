"""Benchmark: workloads users feel — agent sessions, RAG answers that quote, a code edit, free chat — against
modelport at its defaults (llama.cpp built for this CPU where it is, the conversation cache), on PyPI's
portable llama.cpp, with each kind of n-gram speculation (none, the table all requests share, each
request's own context) and without its conversation cache, and
llama-server with modelport's slots and context (8 slots in a 32k shared cache) at its defaults otherwise
and with its best flags for these workloads (n-gram speculation), and as a user starts it bare (the model
and the threads), all in one run; with `--rounds N`, every server once per round, in turn, and the medians.

    .venv/bin/python -m bench.workload [--workloads agent rag code chat] [--servers ...] [--rounds 1]
        [--model smollm2|gemma3-270m] [--whole-length]

Same model on every server (SmolLM2-135M, or Gemma 3 270M: a base model, so each conversation is sent as
one completion's prompt, its messages in plain text), same threads; greedy decoding, so every server is
asked the same. The scripted parts of each conversation (tool calls and their results) are the same whatever
a model answers. modelport ends a greedy answer that loops where llama-server writes on to `max_tokens`, so
the servers write different numbers of tokens (the `tokens` column); with `--whole-length` every answer is
written to its `max_tokens` (`ignore_eos`), the same tokens on every server. Greedy texts still part where
a near-tie falls otherwise (a prompt batched otherwise, a draft verified in one batch): the "answers as
defaults'" column counts the answers word for word llama-server's at its defaults, since n-gram drafts guess
some texts far better than others.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import statistics
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from bench import references, workload_data
from bench.common import (
    MODELS,
    THREADS,
    BenchModel,
    bench_model,
    http_client,
    llama_server,
    machine,
    modelport_server,
    table,
)
from bench.decode import N_CTX, SLOTS, config
from modelport.engines.llamacpp import cpu_builds
from tests.support.live import free_port, serving

BEST_FLAGS = ["--spec-type", "ngram-mod"]
# A request whose connection drops before its answer begins is sent again, up to twice, and counted: under
# the agent workload llama-server dropped one now and then (its log says nothing), which with no retry
# ended its run; the retried request's time (the SDK's pause included) counts in its time to first token.
RETRIES = 2


@dataclass
class Reply:
    first_token: float
    seconds: float
    tokens: int
    cached: int
    text: str

    @property
    def stream_rate(self) -> float:
        decoding = self.seconds - self.first_token
        return (self.tokens - 1) / decoding if self.tokens > 1 and decoding > 0 else float("nan")


@dataclass
class Outcome:
    replies: list[Reply] = field(default_factory=list)
    wall: float = 0.0
    retried: int = 0
    # Each answer's text by what was asked (its place in the workload): with greedy decoding the servers'
    # texts agree unless a near-tie fell otherwise (how a prompt was batched moves the last bits of the
    # logits), and then they wrote different tokens, which n-gram drafts predict differently well.
    texts: dict[tuple[int, ...], str] = field(default_factory=dict)

    def add(self, place: tuple[int, ...], reply: Reply) -> None:
        self.replies.append(reply)
        self.texts[place] = reply.text

    def row(self) -> list[Any]:
        firsts = sorted(r.first_token for r in self.replies)
        p95 = firsts[min(len(firsts) - 1, round(0.95 * (len(firsts) - 1)))]
        rates = [r.stream_rate for r in self.replies if r.stream_rate == r.stream_rate]
        tokens = sum(r.tokens for r in self.replies)
        times = [r.seconds for r in self.replies]
        return [
            statistics.median(firsts) * 1000,
            p95 * 1000,
            statistics.median(rates) if rates else float("nan"),
            tokens / self.wall,
            self.wall,
            tokens,
            sum(r.cached for r in self.replies),
            max(times) / statistics.median(times),
            self.retried,
        ]


@dataclass(frozen=True)
class Speaker:
    """How the workloads talk to the model: as a chat (an instruct model), or, to a base model, as one
    completion whose prompt is the conversation in plain text."""

    model: BenchModel
    base: bool
    whole: bool = False  # every answer written to its max_tokens (`ignore_eos`), loops and all

    async def reply(self, client: Any, messages: list[dict[str, Any]], max_tokens: int) -> Reply:
        """One greedy streamed answer, timed."""
        start = time.perf_counter()
        first = 0.0
        usage = None
        text: list[str] = []
        common: dict[str, Any] = {
            "model": self.model.id,
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
        }
        if self.whole:
            common["extra_body"] = {"ignore_eos": True}
        if self.base:
            said = "\n\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in messages)
            stream = await client.completions.create(
                prompt=f"{said}\n\nAssistant:", stream_options={"include_usage": True}, **common
            )
        else:
            stream = await client.chat.completions.create(
                messages=messages, stream_options={"include_usage": True}, **common
            )
        async for chunk in stream:
            said_now = _text(chunk.choices[0]) if chunk.choices else None
            if said_now:
                first = first or time.perf_counter() - start
                text.append(said_now)
            usage = chunk.usage or usage
        details = getattr(usage, "prompt_tokens_details", None)
        return Reply(
            first or time.perf_counter() - start,
            time.perf_counter() - start,
            usage.completion_tokens if usage else 0,
            int(getattr(details, "cached_tokens", 0) or 0),
            "".join(text),
        )


def _text(choice: Any) -> str | None:
    """A streamed choice's text: a chat delta's content, or a completion's."""
    delta = getattr(choice, "delta", None)
    return delta.content if delta is not None else getattr(choice, "text", None)


async def answered(url: str, speaker: Speaker, asks: list[str], max_tokens: int, in_flight: int) -> Outcome:
    """Each of `asks` as a one-message chat, at most `in_flight` at once."""
    client = http_client(url, RETRIES)
    gate = asyncio.Semaphore(in_flight)
    outcome = Outcome()

    async def one(index: int, ask: str) -> None:
        async with gate:
            asked = [{"role": "user", "content": ask}]
            outcome.add((index,), await speaker.reply(client, asked, max_tokens))

    start = time.perf_counter()
    await asyncio.gather(*(one(index, ask) for index, ask in enumerate(asks)))
    outcome.wall = time.perf_counter() - start
    await client.close()
    return outcome


async def agent(url: str, speaker: Speaker) -> Outcome:
    """16 conversations of 6 turns over one shared ~1,500-token system prompt with six tools; between turns
    the tool runs (a seeded 0-300 ms); at most 6 turns are in flight."""
    client = http_client(url, RETRIES)
    system = {"role": "system", "content": workload_data.system_prompt()}
    # The agent has served before.
    await speaker.reply(client, [system, {"role": "user", "content": "Ready?"}], 1)
    gate = asyncio.Semaphore(6)
    outcome = Outcome()

    async def conversation(index: int) -> None:
        rng = random.Random(index)
        messages: list[dict[str, Any]] = [system]
        for turn, added in enumerate(workload_data.agent_turns(index, 6)):
            messages += added
            async with gate:
                outcome.add((index, turn), await speaker.reply(client, messages, 48))
            await asyncio.sleep(rng.uniform(0, 0.3))

    start = time.perf_counter()
    await asyncio.gather(*(conversation(i) for i in range(16)))
    outcome.wall = time.perf_counter() - start
    await client.close()
    return outcome


async def rag(url: str, speaker: Speaker) -> Outcome:
    """8 questions, 4 at a time, each over its own ~2,000-token document, answered by quoting it."""
    asks = [
        f"{document}\n\nQuote, word for word, the paragraph of the document above that begins: {start}"
        for document, start in workload_data.documents(8)
    ]
    return await answered(url, speaker, asks, 160, 4)


async def code(url: str, speaker: Speaker) -> Outcome:
    """A 150-line file returned whole with one function renamed, three times in turn (up to 512 tokens)."""
    source = workload_data.source_file()
    asks = []
    for index in range(3):
        name = workload_data.function_name(source, index)
        asks.append(
            f"Rename the function {name} to renamed_{index}. Return the whole file.\n\n```python\n{source}```"
        )
    return await answered(url, speaker, asks, 512, 1)


async def free_chat(url: str, speaker: Speaker) -> Outcome:
    """16 short questions, 8 at a time, 128 tokens each: the control, where nothing repeats."""
    return await answered(url, speaker, workload_data.QUESTIONS, 128, 8)


async def warm_up(url: str, speaker: Speaker) -> None:
    """One short answer, so that no workload pays for the first request's page faults."""
    client = http_client(url, RETRIES)
    await speaker.reply(client, [{"role": "user", "content": "Hello"}], 8)
    await client.close()


WORKLOADS: dict[str, Callable[[str, Speaker], Coroutine[Any, Any, Outcome]]] = {
    "agent": agent,
    "rag": rag,
    "code": code,
    "chat": free_chat,
}


@contextmanager
def llama_server_bare(binary: Any, gguf: Any) -> Iterator[str]:
    """llama-server as a user starts it: the model, the threads, nothing else (4 slots sharing the model's
    8k context: too little for the agent and RAG workloads)."""
    port = free_port()
    command = [str(binary), "-m", str(gguf), "--port", str(port), "-t", str(THREADS), "-tb", str(THREADS)]
    command += ["-ngl", "0", "--log-disable"]
    with serving(command, "/health", port, "llama-server") as (url, _):
        yield url


@contextmanager
def on_the_wheel(config: str) -> Iterator[str]:
    """modelport on PyPI's portable llama.cpp even where this CPU has its own build."""
    with mock.patch.dict(os.environ, {cpu_builds.VARIABLE: "portable"}), modelport_server(config) as url:
        yield url


def servers(model: BenchModel) -> Iterator[tuple[str, Callable[[], AbstractContextManager[str]]]]:
    base = config(model)

    def speculating(kind: str) -> str:
        return base + f'speculative = "{kind}"\n'

    forgetting = base + "conversation_cache_mib = 0\n"
    yield "modelport", lambda: modelport_server(base)
    yield "modelport wheel", lambda: on_the_wheel(base)
    yield "modelport without speculation", lambda: modelport_server(speculating("none"))
    yield "modelport ngram-mod", lambda: modelport_server(speculating("ngram-mod"))
    yield "modelport ngram-map-k", lambda: modelport_server(speculating("ngram-map-k"))
    yield "modelport without conversation cache", lambda: modelport_server(forgetting)
    binary = references.llama_server()
    if binary is None:
        print("\nllama-server: not built (python -m bench.references); its rows are absent.")
        return
    gguf = model.gguf
    yield "llama-server defaults", lambda: llama_server(binary, gguf, SLOTS, N_CTX)
    yield "llama-server best", lambda: llama_server(binary, gguf, SLOTS, N_CTX, extra=BEST_FLAGS)
    yield "llama-server bare", lambda: llama_server_bare(binary, gguf)


HEADERS = [
    "server",
    "TTFT p50 ms",
    "TTFT p95 ms",
    "stream tok/s",
    "aggregate tok/s",
    "wall s",
    "tokens",  # written: a server that ends a looping answer early writes fewer, in less wall time
    "cached",
    "slowest ÷ median",
    "retried",
]


class Retried(logging.Handler):
    """Counts the requests the OpenAI SDK sent again (it logs each retry)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += record.getMessage().startswith("Retrying request")


def summary(rows: list[list[Any]]) -> list[Any]:
    """Each column's median over the rounds; retried requests (the last column) summed."""
    columns = list(zip(*rows, strict=True))
    return [*(statistics.median(column) for column in columns[:-1]), sum(columns[-1])]


def same_answers(texts: dict[str, list[dict[tuple[int, ...], str]]], server: str) -> str:
    """How many of a server's answers, over the rounds, are word for word llama-server's at its defaults
    (the same ask in the same round): a ratio between servers that wrote different text compares unequal
    work where speculation runs, since n-gram drafts guess some texts far better than others."""
    reference = texts.get("llama-server defaults")
    if reference is None:
        return "-"
    pairs = [
        (answers.get(place), theirs)
        for answers, reference_answers in zip(texts[server], reference, strict=False)
        for place, theirs in reference_answers.items()
    ]
    return f"{sum(ours == theirs for ours, theirs in pairs)}/{len(pairs)}"


def main(
    chosen: list[str], only: list[str] | None, rounds: int, model_name: str, whole: bool = False
) -> None:
    """Each server started afresh for every round, in turn, so that the machine's drift affects all alike;
    medians over the rounds (retried requests: summed)."""
    model = bench_model(model_name)
    speaker = Speaker(model, base=model_name != "smollm2", whole=whole)
    averaged = "one run" if rounds == 1 else f"medians of {rounds} interleaved rounds"
    talked = "completions of the conversation as text" if speaker.base else "chat"
    lengths = ", every answer to its max_tokens (ignore_eos)" if whole else ""
    print(f"# Workloads on {model.gguf.name} ({talked}), {averaged}{lengths}")
    print(f"\n{machine()}")
    print(f"\nllama-server defaults: {SLOTS} slots in a shared {N_CTX}-token cache (modelport's); best: and")
    print(f"{' '.join(BEST_FLAGS)}; bare: the model and the threads only")
    results: dict[str, dict[str, list[list[Any]] | str]] = {name: {} for name in chosen}
    texts: dict[str, dict[str, list[dict[tuple[int, ...], str]]]] = {name: {} for name in chosen}
    retried = Retried()
    sdk = logging.getLogger("openai._base_client")
    sdk.addHandler(retried)
    sdk.setLevel(logging.INFO)
    for _ in range(rounds):
        for server, start in servers(model):
            if only and server not in only:
                continue
            with start() as url:
                asyncio.run(warm_up(url, speaker))
                for name in chosen:
                    earlier = results[name].setdefault(server, [])
                    if isinstance(earlier, str):  # failed in an earlier round
                        continue
                    retried.count = 0
                    try:
                        outcome = asyncio.run(WORKLOADS[name](url, speaker))
                    except Exception as error:  # a server that fails a workload is reported, not fatal
                        results[name][server] = f"failed: {type(error).__name__}: {error}"
                        print(f"  {server}: {name}: {results[name][server]}", flush=True)
                        continue
                    outcome.retried = retried.count
                    earlier.append(outcome.row())
                    texts[name].setdefault(server, []).append(outcome.texts)
                    print(f"  {server}: {name}: {' | '.join(f'{v:.3g}' for v in earlier[-1])}", flush=True)
    for name, by_server in results.items():
        medians = {server: summary(rows) for server, rows in by_server.items() if not isinstance(rows, str)}
        headers = [
            *HEADERS,
            "answers as defaults'",
            "× defaults (p95 TTFT, aggregate)",
            "× best (p95 TTFT, aggregate)",
        ]
        rows = []
        for server, found in by_server.items():
            if isinstance(found, str):
                rows.append([server, found, *[""] * (len(headers) - 2)])
                continue
            row: list[Any] = [*medians[server], same_answers(texts[name], server)]
            for reference in ("llama-server defaults", "llama-server best"):
                other = medians.get(reference)
                row.append(f"{row[1] / other[1]:.2f}, {row[3] / other[3]:.2f}" if other else "-")
            rows.append([server, *row])
        print(table(f"{name}: {(WORKLOADS[name].__doc__ or '').splitlines()[0]}", headers, rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--servers", nargs="+", help="only these servers (by the names the report gives)")
    parser.add_argument("--rounds", type=int, default=1, help="medians of this many interleaved rounds")
    parser.add_argument("--model", choices=MODELS, default=MODELS[0], help="a base model is sent completions")
    parser.add_argument(
        "--whole-length",
        action="store_true",
        help="every answer written to its max_tokens (ignore_eos): the servers write the same tokens, where"
        " modelport otherwise ends a greedy answer that loops",
    )
    arguments = parser.parse_args()
    main(arguments.workloads, arguments.servers, arguments.rounds, arguments.model, arguments.whole_length)
