"""Benchmark 9: decode beside busy neighbours — the engine's decode rate with 0, one per two cores and one
per core busy processes (a `while True` each), at 1 and 8 streams, for several thread settings.

llama.cpp's threads spin at every barrier, so one descheduled thread stalls the others: the settings differ
in how many threads decode, whether each is bound to a CPU of its own, and how long they spin.

    .venv/bin/python -m bench.contention [--rounds 2] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.common import NO_EOS, STORY, machine, median, table
from modelport.engines import cpus, llamacpp

CORES = cpus.usable()
SETTINGS: dict[str, dict[str, Any]] = {
    f"{CORES} threads (the default)": {"n_threads": CORES},
    f"{CORES} threads, pin": {"n_threads": CORES, "pin": True},
    f"{CORES} threads, pin, poll 0": {"n_threads": CORES, "pin": True, "poll": 0},
    f"{max(1, CORES - 1)} decode + {CORES} prompt threads": {
        "n_threads": max(1, CORES - 1),
        "n_threads_batch": CORES,
    },
}
BUSY = sorted({0, max(1, CORES // 2), CORES})
STREAMS = (1, 8)


def generate(server: Any, streams: int, tokens: int, tag: int) -> float:
    """Aggregate decode tokens/s of `streams` side by side (prompt time excluded: from each first token)."""
    firsts: list[float] = []
    ends: list[float] = []
    counts: list[int] = []

    def one(i: int) -> None:
        times: list[float] = []

        def on_chunk(chunk: dict[str, Any]) -> bool:
            if any(c.get("text") for c in chunk.get("choices") or []):
                times.append(time.perf_counter())
            return False

        request = {
            "prompt": f"{tag}.{i}. {STORY}", "max_tokens": tokens, "temperature": 0, "logit_bias": NO_EOS,
            "stream": True,
        }  # fmt: skip
        server.handle_completions(request, on_chunk)
        firsts.append(times[0])
        ends.append(times[-1])
        counts.append(len(times) - 1)

    workers = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(counts) / (max(ends) - min(firsts))


def worker(setting: str) -> None:
    """One engine with `setting`, in a process of its own; measures the cases read from stdin."""
    server = llamacpp.start_server(**SETTINGS[setting])
    print("ready", flush=True)
    for tag, line in enumerate(sys.stdin):
        streams, tokens = map(int, line.split())
        print(json.dumps(generate(server, streams, tokens, tag)), flush=True)


@contextmanager
def busy(count: int) -> Iterator[None]:
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    time.sleep(0.5 if count else 0)
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main(rounds: int, tokens: int) -> None:
    print(f"# Decode beside busy processes, {CORES} usable CPUs, median of {rounds} rounds\n\n{machine()}")
    rates: dict[tuple[str, int, int], list[float]] = {}
    for setting in SETTINGS:
        command = [sys.executable, "-m", "bench.contention", "--setting", setting]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert process.stdin
        assert process.stdout
        while process.stdout.readline().strip() != "ready":
            pass
        process.stdin.write("1 8\n")  # warm-up
        process.stdin.flush()
        process.stdout.readline()
        for _ in range(rounds):
            for count in BUSY:
                with busy(count):
                    for streams in STREAMS:
                        per_stream = tokens if streams == 1 else max(8, tokens // 2)
                        process.stdin.write(f"{streams} {per_stream}\n")
                        process.stdin.flush()
                        rate = float(process.stdout.readline())
                        rates.setdefault((setting, count, streams), []).append(rate)
        process.stdin.close()
        process.wait()
    before = next(iter(SETTINGS))
    headers = ["setting", "busy", "streams", "tok/s", "× its idle", "× before, same load"]
    rows = []
    for (setting, count, streams), values in rates.items():
        rate = median(values)
        idle = median(rates[(setting, 0, streams)])
        reference = median(rates[(before, count, streams)])
        rows.append([setting, count, streams, rate, f"{rate / idle:.2f}", f"{rate / reference:.2f}"])
    print(table("Decode rate", headers, rows))
    print(
        f"\nTargets: beside {max(1, CORES // 2)} busy process(es) (one per two cores) ≥ 0.5× the idle rate; "
        "alone, 1 and 8 streams ≥ 0.97× before."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--setting", choices=list(SETTINGS), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    threading.excepthook = lambda _: None  # xllamacpp's worker threads may complain at interpreter exit
    if arguments.setting:
        worker(arguments.setting)
    else:
        main(arguments.rounds, arguments.tokens)
