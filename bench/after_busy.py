"""Benchmark: the first token of a request that comes just after other processes kept every CPU busy —
modelport in-process (its conversation cache saving each turn, its engine's threads bound while the
machine is busy) against the engine called directly (bound the same way, saving nothing), each in a
process of its own, every request after a busy spell of its own (a `while True` process per CPU).

A turn's save wakes llama.cpp's HTTP listener beside its main thread while the machine is busy, and both
are bound then; the next prompt read its first 1.5-3× slower while the listener kept the CPU its worker
thread needed (`thread_binding`).

    .venv/bin/python -m bench.after_busy [--rounds 8] [--busy-seconds 3] [--tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import AsyncExitStack

from bench.common import STORY, machine, median, rotated, table
from bench.decode import Measure, worker_process
from modelport import machine as this_machine

ENGINE = "engine called directly (xllamacpp)"
CASES = {ENGINE: "engine", "modelport in-process": "in-process"}
SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"


async def busy_spell(seconds: float) -> None:
    """Every CPU this process may use kept busy by another process for `seconds`."""
    spinners = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", SPIN.format(seconds=seconds))
        for _ in range(this_machine.usable_cpus())
    ]
    for spinner in spinners:
        await spinner.wait()


async def main(rounds: int, seconds: float, tokens: int) -> None:
    print(f"# The first token after a busy spell of {seconds:g} s, {rounds} rounds\n\n{machine()}")
    firsts: dict[str, list[float]] = {name: [] for name in CASES}
    async with AsyncExitStack() as stack:
        cases: dict[str, Measure] = {
            name: await stack.enter_async_context(worker_process(case, tokens, "smollm2"))
            for name, case in CASES.items()
        }
        for one in cases.values():
            await one(f"0. {STORY}")  # warm-up
        for i in range(rounds):
            for name in rotated(list(cases), i):
                await busy_spell(seconds)
                firsts[name].append((await cases[name](f"{i + 1}. {STORY}")).first_token * 1000)
    engine = median(firsts[ENGINE])
    rows = [
        [
            name,
            median(values),
            max(values),
            f"{median(values) / engine:.2f}",
            " ".join(f"{v:.0f}" for v in values),
        ]
        for name, values in firsts.items()
    ]
    print(table("First token after a busy spell", ["", "median ms", "max ms", "× engine", "each"], rows))
    print("\nTarget: modelport's median and max within 10% of the engine's.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--busy-seconds", type=float, default=3.0)
    parser.add_argument("--tokens", type=int, default=128)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.busy_seconds, arguments.tokens))
