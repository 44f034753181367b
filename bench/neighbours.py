"""Benchmark: a chat answer in a server whose other engines (embeddings, speech, transcription, prompt
scoring) share its cores, against the same answer from a server of the chat model alone, in one run. A thread
pool that spins after its work (ONNX Runtime's, OpenBLAS's) takes the cores from the llama.cpp decoding that
comes next. Two `modelport serve` processes: the default models, and the chat model alone. Each round asks,
over HTTP and one at a time, the answer of each server with nothing before it, then the default server's
answer right after an embedding, a spoken sentence, a transcription and a scored prompt (`echo` with
`logprobs`), then the same answer started together with each of them (a voice agent speaks one sentence
while the model writes the next); each case after a second of quiet, each answer to a prompt of its own. The
table gives each case's median and the answer's median over the lone chat server's.

    .venv/bin/python -m bench.neighbours [--rounds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.common import NO_EOS, http_client, machine, median, modelport_process, modelport_server, run, table

CHAT = "smollm2-135m-instruct"
CHAT_ALONE = f'defaults = false\n[[models]]\nid = "{CHAT}"\nengine = "llamacpp"\n'
ANSWER = 64  # tokens of the chat answer (its end is barred: every answer is this long)
SETTLE = 1.0  # seconds of quiet before each case: the last answer's slot saved and emptied, pools asleep
QUESTION = "What is the weather like in Paris today?"
SENTENCE = "The sea is calm tonight. The tide is full, the moon lies fair upon the straits."


async def measure(url: str, alone_url: str, rounds: int) -> list[list[object]]:
    client, lone = http_client(url), http_client(alone_url)
    spoken = (
        await client.audio.speech.create(model="tts-1", voice="alloy", input=QUESTION, response_format="wav")
    ).content

    async def embed(i: int) -> Any:
        return await client.embeddings.create(model="text-embedding-3-small", input=[f"{QUESTION} {i}"] * 4)

    async def speak(i: int) -> Any:
        said = await client.audio.speech.create(model="tts-1", voice="alloy", input=f"{SENTENCE} {i}")
        return said.content

    async def hear(i: int) -> Any:
        return await client.audio.transcriptions.create(model="whisper-1", file=(f"{i}.wav", spoken))

    async def score(i: int) -> Any:
        prompt = f"{QUESTION} Paris {i}"
        return await client.completions.create(model=CHAT, prompt=prompt, echo=True, logprobs=1, max_tokens=0)

    asked = iter(range(1_000_000))

    async def answer(_: int, server: Any = client) -> Any:  # a prompt of its own: none restored from another
        messages = [{"role": "user", "content": f"{next(asked)}. Tell me about the sea."}]
        return await server.chat.completions.create(
            model=CHAT, messages=messages, max_tokens=ANSWER, temperature=0, logit_bias=NO_EOS
        )

    neighbours: dict[str, Callable[[int], Awaitable[Any]]] = {
        "an embedding of 4 texts": embed,
        "a spoken sentence": speak,
        "a transcription": hear,
        "a scored prompt": score,
    }
    for i in range(2):  # each engine's first call (a load, a warm-up) out of the figures
        await answer(-1 - i, lone)
        for work in (answer, *neighbours.values()):
            await work(-1 - i)
    reference: list[float] = []
    alone: list[float] = []
    before: dict[str, list[float]] = {name: [] for name in neighbours}
    after: dict[str, list[float]] = {name: [] for name in neighbours}
    beside: dict[str, list[tuple[float, float]]] = {name: [] for name in neighbours}

    async def timed(work: Awaitable[Any]) -> float:
        start = time.perf_counter()
        await work
        return time.perf_counter() - start

    for round_ in range(rounds):
        await asyncio.sleep(SETTLE)
        start = time.perf_counter()
        await answer(round_, lone)
        reference.append(time.perf_counter() - start)
        await asyncio.sleep(SETTLE)
        start = time.perf_counter()
        await answer(round_)
        alone.append(time.perf_counter() - start)
        for name, work in neighbours.items():
            await asyncio.sleep(SETTLE)
            start = time.perf_counter()
            await work(round_)
            before[name].append(time.perf_counter() - start)
            start = time.perf_counter()
            await answer(round_)
            after[name].append(time.perf_counter() - start)
        for name, work in neighbours.items():
            await asyncio.sleep(SETTLE)
            took, then = await asyncio.gather(timed(work(round_)), timed(answer(round_)))
            beside[name].append((took, then))
    base = median(reference)
    rows: list[list[object]] = [
        ["the chat model alone", "nothing", "", base * 1000, 1.0],
        ["the default models", "nothing", "", median(alone) * 1000, median(alone) / base],
    ]
    for name in neighbours:
        took, then = median(before[name]), median(after[name])
        rows.append(["the default models", name, took * 1000, then * 1000, then / base])
    for name, pairs in beside.items():
        took, then = median([t for t, _ in pairs]), median([a for _, a in pairs])
        case = f"{name}, at the same time"
        rows.append(["the default models", case, took * 1000, then * 1000, then / base])
    return rows


async def main(rounds: int) -> None:
    print(machine())
    with modelport_process() as (url, _), modelport_server(CHAT_ALONE) as alone_url:
        rows = await measure(url, alone_url, rounds)
    headers = [
        "server",
        "right after (or beside)",
        "it took (ms, median)",
        f"a {ANSWER}-token answer (ms, median)",
        "× the chat model alone",
    ]
    print(table(f"A chat answer after another engine's work, {rounds} rounds", headers, rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    run(main(parser.parse_args().rounds))
