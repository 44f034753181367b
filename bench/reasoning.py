"""Benchmark: what a thinking model spends before it calls a tool, by reasoning effort — the tokens it thinks
and the seconds until the call's first delta, with `tool_choice: "required"` and `max_tokens` 400. The model
is SmolLM2 under a DeepSeek R1 distill's template (its prompt opens the thinking, so it always thinks:
`tests/support/families.py`); `none` (the thinking closed at once) is the reference in the same run.

    .venv/bin/python -m bench.reasoning [--runs 5] [--max-tokens 400]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import modelport
from bench.common import machine, median, table
from modelport.settings import ModelConfig, Settings

QUESTIONS = [
    "What is 17 plus 25?",
    "Add 3.5 and 4.25 for me.",
    "What do 1200 and 345 make together?",
    "Sum 9 and 91, please.",
    "I need 64 + 36.",
]
EFFORTS = ("none", "low", "medium", "high")


def one(
    client: modelport.OpenAI, effort: str, question: str, max_tokens: int, seed: int, tool: dict[str, Any]
) -> tuple[float, int, int]:
    """Seconds to the call's first delta (nan: no call came), tokens thought, tokens made. Sampled, with a
    seed: greedy, this model loops in its thinking, and the repetition stop ends the answer there."""
    start = time.perf_counter()
    first = None
    usage: Any = None
    stream = client.chat.completions.create(
        model="r1",
        messages=[{"role": "user", "content": question}],
        tools=[tool],  # type: ignore[list-item]
        tool_choice="required",
        parallel_tool_calls=False,
        reasoning_effort=effort,  # type: ignore[arg-type]
        max_tokens=max_tokens,
        temperature=0.7,
        seed=seed,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if first is None and any(c.delta.tool_calls for c in chunk.choices):
            first = time.perf_counter() - start
        usage = chunk.usage or usage
    thought = usage.completion_tokens_details.reasoning_tokens if usage.completion_tokens_details else 0
    return (first if first is not None else float("nan")), thought, usage.completion_tokens


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="questions asked per effort (default 5)")
    parser.add_argument("--max-tokens", type=int, default=400)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.families import ADD, repack

    with tempfile.TemporaryDirectory() as folder:
        gguf = repack("deepseek-r1", Path(folder))
        config = {
            "id": "r1",
            "engine": "llamacpp",
            "path": str(gguf),
            "n_parallel": 1,
            "n_ctx_per_slot": 4096,
        }
        client = modelport.OpenAI(
            settings=Settings(defaults=False, models=[ModelConfig.model_validate(config)])
        )
        one(client, "none", "Warm up: 1 + 1?", 16, 0, ADD)
        rows = []
        reference = None
        for effort in EFFORTS:
            runs = [
                one(client, effort, QUESTIONS[i % len(QUESTIONS)], args.max_tokens, i, ADD)
                for i in range(args.runs)
            ]
            called = [r[0] for r in runs if r[0] == r[0]]  # nan: no call within max_tokens
            seconds = median(called)
            reference = seconds if effort == "none" else reference
            ratio = seconds / reference if reference else float("nan")
            thought = [float(r[1]) for r in runs]
            made = median([float(r[2]) for r in runs])
            rows.append(
                (effort, median(thought), max(thought), made, f"{len(called)}/{len(runs)}", seconds, ratio)
            )
        client.close()
    headers = [
        "effort", "thinking tokens (median)", "thinking tokens (most)", "tokens made (median)", "called",
        "seconds to the call (median)", "× effort none",
    ]  # fmt: skip
    print(machine())
    title = f"Before the call: tool_choice required, max_tokens {args.max_tokens}, {args.runs} runs an effort"
    print(table(title, headers, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
