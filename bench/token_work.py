"""Benchmark: the serving layer's own work per streamed token, with no model and no wake-ups — what is left of
`bench.serving_cpu`'s figure once the thread hand-overs are taken away. A predictor hands over its tokens
all at once (an async iterator, read on the event loop as llama.cpp's chunk stream is), and each path's
stream is read whole through the app in this process (httpx's ASGI transport: every middleware, the framing,
the write), `--rounds` times; the figure is the process's CPU a token, the least of the rounds and their
median. The chat stream is the reference a Responses stream is measured against: both carry the same tokens.

    .venv/bin/python -m bench.token_work [--tokens 4000] [--rounds 12]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

import httpx

from bench.common import machine, scratch, table
from modelport import Parameter
from modelport.server.app import create_app
from modelport.service import Service
from modelport.settings import ModelConfig, Settings, StoreSettings

MODEL = "instant"


def instant_chat(
    messages: list[dict[str, Any]], max_tokens: Annotated[int | None, Parameter.MaxOutputTokens] = None
) -> AsyncIterator[dict[str, Any]]:
    """`max_tokens` chunks of one short word each, ready at once (an async iterator: no thread per token)."""
    count = max_tokens or 16

    async def chunks() -> AsyncIterator[dict[str, Any]]:
        head = {"id": "chatcmpl-instant", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
        yield {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        for _ in range(count):
            yield {**head, "choices": [{"index": 0, "delta": {"content": " word"}, "finish_reason": None}]}
        usage = {"prompt_tokens": len(messages), "completion_tokens": count, "total_tokens": count + 1}
        yield {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": usage}

    return chunks()


def bodies(tokens: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each path's request: the same tokens, streamed, stored nowhere."""
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    response = {"model": MODEL, "input": "Hi", "stream": True, "store": False}
    return {
        "chat, streamed": ("/v1/chat/completions", {**chat, "max_tokens": tokens}),
        "responses, streamed": ("/v1/responses", {**response, "max_output_tokens": tokens}),
    }


async def measure(tokens: int, rounds: int) -> list[list[object]]:
    folder = scratch("token-work")
    settings = Settings(
        defaults=False,
        models=[ModelConfig(id=MODEL, predictor="bench.token_work:instant_chat")],
        store=StoreSettings(url=f"sqlite+aiosqlite:///{folder / 'state.db'}"),
    )
    app = create_app(service=Service.from_settings(settings))
    rows: list[list[object]] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60) as client:
            reference = None
            for name, (path, body) in bodies(tokens).items():
                spent = []
                for round_ in range(rounds + 1):  # the first warms up, uncounted
                    start = time.process_time()
                    answer = await client.post(path, json=body)
                    if round_:
                        spent.append((time.process_time() - start) / tokens * 1e6)
                    answer.raise_for_status()
                least, middle = min(spent), statistics.median(spent)
                reference = reference or middle
                rows.append([name, f"{least:.1f}", f"{middle:.1f}", f"{middle / reference:.2f}"])
    return rows


def main(tokens: int, rounds: int) -> None:
    print(f"# The serving layer's work per streamed token, {tokens} tokens, {rounds} rounds\n\n{machine()}")
    rows = asyncio.run(measure(tokens, rounds))
    headers = ["path", "least µs a token", "median µs a token", "× chat"]
    print(table("CPU per token, no model, no wake-ups", headers, rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=12)
    arguments = parser.parse_args()
    main(arguments.tokens, arguments.rounds)
