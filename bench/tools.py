"""Benchmark: what a tool call and a JSON answer cost in tokens and time, with the JSON held to a compact
layout (the default) against whitespace left free (`json_whitespace: "flexible"`), same seeds, one run.

    .venv/bin/python -m bench.tools [--seeds 10]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import modelport
from bench.common import machine, table
from modelport.settings import ModelConfig, Settings

CHAT = "smollm2-135m-instruct"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}
PET = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "owner": {"type": "string"}},
    "required": ["name", "age", "owner"],
}
SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}


def cases() -> dict[str, dict[str, Any]]:
    return {
        "tool call (required)": {
            "messages": [SYSTEM, {"role": "user", "content": "What is the weather in Paris?"}],
            "tools": [WEATHER],
            "tool_choice": "required",
        },
        "json_schema answer": {
            "messages": [SYSTEM, {"role": "user", "content": "Describe a dog called Rex."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "pet", "schema": PET}},
        },
    }


def measure(client: Any, body: dict[str, Any], whitespace: str, seeds: int) -> tuple[float, float, float]:
    """Median completion tokens and seconds, and the share of answers that ended on their own."""
    tokens, seconds, stopped = [], [], 0
    for seed in range(seeds):
        start = time.perf_counter()
        reply = client.chat.completions.create(
            model=CHAT, max_tokens=200, seed=seed, extra_body={"json_whitespace": whitespace}, **body
        )
        seconds.append(time.perf_counter() - start)
        tokens.append(reply.usage.completion_tokens)
        stopped += reply.choices[0].finish_reason != "length"
    return statistics.median(tokens), statistics.median(seconds), stopped / seeds


def main(seeds: int) -> None:
    print(f"# JSON layout: compact vs free whitespace, {seeds} seeds\n\n{machine()}")
    settings = Settings(defaults=False, models=[ModelConfig(id=CHAT, engine="llamacpp")], preload=True)
    client = modelport.OpenAI(settings=settings, preload=True)
    rows = []
    for name, body in cases().items():
        free = measure(client, body, "flexible", seeds)
        tight = measure(client, body, "compact", seeds)
        rows.append(
            [name, free[0], tight[0], free[1] * 1000, tight[1] * 1000, f"{free[2]:.0%}", f"{tight[2]:.0%}"]
        )
    client.close()
    headers = [
        "answer",
        "tokens free",
        "tokens compact",
        "ms free",
        "ms compact",
        "ended free",
        "ended compact",
    ]
    print(table("Median completion tokens and time per answer (in-process, 200-token cap)", headers, rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    main(parser.parse_args().seeds)
