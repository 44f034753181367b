"""Benchmark: a conversation's second turn. Time to its first token after a first turn that was the user's
message alone (a pasted document of ~1,150 tokens, or a short question), one conversation at a time, on
modelport (chat completions, with and without `prompt_cache_key`; the Responses API chained by
`previous_response_id`, and with server-side compaction's count: a `compact_threshold` the turn's size may
reach and its count does not) and on llama-server (chat, its defaults, whose slot keeps the first turn).
And a new conversation's first turn after another's, both offered the same tools and no system message,
on SmolLM2 under Qwen3's template (which describes the tools before the messages: all the two prompts
share), on both servers.
Every round has texts of its own, the servers side by side, in turn.

    .venv/bin/python -m bench.second_turn [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import openai

from bench import references
from bench.common import (
    NO_EOS,
    bench_model,
    http_client,
    llama_server,
    machine,
    median,
    modelport_server,
    table,
)
from bench.decode import N_CTX, SLOTS, config

MODEL = bench_model("smollm2")
CHAT = MODEL.id
# SmolLM2's weights under Qwen3's template (its tools in a system block of their own, before the messages).
QWEN3 = Path(__file__).parent.parent / "tests" / "service" / "templates" / "qwen3.jinja"
TEMPLATED = f"{CHAT}-qwen3"
QUESTION = "Which mill does paragraph 3 name?"
# A count that the turn's size says it may reach (so it is made) and that the prompt does not reach.
THRESHOLD = 3000


def document(name: str, paragraphs: int) -> str:
    lines = (
        f"Paragraph {i} of {name}: the river runs past mill {i} and the baker sells {i * 3} loaves."
        for i in range(paragraphs)
    )
    return f"Document {name}.\n" + "\n".join(lines)


async def _first_token(start: float, stream: Any) -> float:
    """Seconds from `start` (before the request was sent) to the stream's first text; the stream is read to
    its end, so that the server's slot is free for the next case."""
    first = float("nan")
    async with stream:
        async for event in stream:
            delta = getattr(event, "delta", None)
            if getattr(event, "choices", None):  # a chat chunk: its text, thinking or a call's first piece
                delta = event.choices[0].delta
                text = delta.content or getattr(delta, "reasoning_content", None) or delta.tool_calls
            else:
                text = delta
            if text and first != first:  # not yet seen (nan)
                first = time.perf_counter() - start
    return first


async def chat(client: openai.AsyncOpenAI, first: str, keyed: bool) -> float:
    """The second chat turn's first token, after the first turn answered (a key on both, where `keyed`)."""
    extra: dict[str, Any] = {"prompt_cache_key": first[:40]} if keyed else {}
    said = [{"role": "user", "content": first}]
    answer = await client.chat.completions.create(
        model=CHAT, messages=said, max_tokens=16, temperature=0, **extra
    )
    later = [*said, {"role": "assistant", "content": answer.choices[0].message.content or ""}]
    later.append({"role": "user", "content": QUESTION})
    start = time.perf_counter()
    stream = await client.chat.completions.create(
        model=CHAT,
        messages=later,
        max_tokens=16,
        temperature=0,
        stream=True,
        **extra,
    )
    return await _first_token(start, stream)


async def responses(client: openai.AsyncOpenAI, first: str, counted: bool) -> float:
    """The chained Responses turn's first token (with `context_management`'s count, where `counted`)."""
    extra: dict[str, Any] = {}
    if counted:
        extra["context_management"] = [{"type": "compaction", "compact_threshold": THRESHOLD}]
    one = await client.responses.create(model=CHAT, input=first, max_output_tokens=16, temperature=0)
    start = time.perf_counter()
    stream = await client.responses.create(
        model=CHAT, input=QUESTION, previous_response_id=one.id, max_output_tokens=16, temperature=0,
        stream=True, **extra,
    )  # fmt: skip
    return await _first_token(start, stream)


TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": f"shelf_{i}",
            "description": f"Where an item of aisle {i} is kept, and how many of it are left on the shelf.",
            "parameters": {
                "type": "object",
                "properties": {"item": {"type": "string"}, "count": {"type": "integer", "minimum": 0}},
                "required": ["item"],
            },
        },
    }
    for i in range(16)
]


async def new_conversation(client: openai.AsyncOpenAI, first: str, beside: bool = False) -> float:
    """A new conversation's first token, after another conversation's turn, both offered `TOOLS`; `beside`:
    both while a long completion streams on the same server (no turn is left resting in its slot)."""
    running = None
    if beside:
        story = f"{first.split('.')[0]}: tell a long story about a ship."
        running = asyncio.create_task(
            client.completions.create(model=TEMPLATED, prompt=story, max_tokens=256, logit_bias=NO_EOS)
        )
        await asyncio.sleep(0.5)
    said: Any = [{"role": "user", "content": first}]
    await client.chat.completions.create(
        model=TEMPLATED, messages=said, tools=TOOLS, max_tokens=16, temperature=0
    )
    asked: Any = [{"role": "user", "content": f"{first.split('.')[0]}: {QUESTION}"}]
    start = time.perf_counter()
    stream = await client.chat.completions.create(
        model=TEMPLATED,
        messages=asked,
        tools=TOOLS,
        max_tokens=16,
        temperature=0,
        stream=True,
    )
    took = await _first_token(start, stream)
    if running is not None:
        await running
    return took


Case = Callable[[openai.AsyncOpenAI, str], Awaitable[float]]
CASES: dict[str, tuple[str, Case]] = {
    "modelport chat": ("modelport", lambda c, t: chat(c, t, keyed=False)),
    "modelport chat, prompt_cache_key": ("modelport", lambda c, t: chat(c, t, keyed=True)),
    "modelport responses": ("modelport", lambda c, t: responses(c, t, counted=False)),
    "modelport responses, compaction's count": ("modelport", lambda c, t: responses(c, t, counted=True)),
    "llama-server chat": ("llama-server", lambda c, t: chat(c, t, keyed=False)),
    "modelport new conversation, same tools": ("modelport", new_conversation),
    "llama-server new conversation, same tools": ("llama-server, Qwen3's template", new_conversation),
    "modelport new conversation beside a stream": ("modelport", lambda c, t: new_conversation(c, t, True)),
    "llama-server new conversation beside a stream": (
        "llama-server, Qwen3's template",
        lambda c, t: new_conversation(c, t, True),
    ),
}


async def measure(clients: dict[str, openai.AsyncOpenAI], rounds: int) -> dict[tuple[str, str], list[float]]:
    seen: dict[tuple[str, str], list[float]] = {}
    for round_ in range(rounds + 1):  # the first round warms each server, and is not counted
        for size, paragraphs in (("document", 70), ("question", 3)):
            for index, (name, (server, case)) in enumerate(CASES.items()):
                if server not in clients:
                    continue
                took = await case(clients[server], document(f"r{round_}c{index}{size}", paragraphs))
                if round_:
                    seen.setdefault((size, name), []).append(took)
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(machine())
    with ExitStack() as stack:
        templated = f'[[models]]\nid = "{TEMPLATED}"\nengine = "llamacpp"\npath = "{MODEL.gguf}"\n'
        templated += f"chat_template = {json.dumps(QWEN3.read_text())}\n"
        served = stack.enter_context(modelport_server(config(MODEL) + templated))
        clients = {"modelport": http_client(served)}
        binary = references.llama_server()
        if binary is None:
            print("\nllama-server: not built (python -m bench.references); its rows are absent.")
        else:
            url = stack.enter_context(llama_server(binary, MODEL.gguf, SLOTS, N_CTX))
            clients["llama-server"] = http_client(url)
            extra = ["--chat-template-file", str(QWEN3)]
            url = stack.enter_context(llama_server(binary, MODEL.gguf, SLOTS, N_CTX, extra=extra))
            clients["llama-server, Qwen3's template"] = http_client(url)
        seen = asyncio.run(measure(clients, args.rounds))
    rows = []
    for (size, name), took in seen.items():
        new = ("new conversation, same tools", "new conversation beside a stream")
        server = next((f"llama-server {case}" for case in new if case in name), "llama-server chat")
        reference = seen.get((size, server))
        ratio = median(took) / median(reference) if reference else float("nan")
        rows.append([size, name, median(took) * 1000, max(took) * 1000, ratio])
    headers = ["first message", "case", "second turn's TTFT p50 ms", "max ms", "÷ llama-server"]
    print(table("A conversation's second turn", headers, rows))


if __name__ == "__main__":
    main()
