"""Benchmark 9: decode beside busy neighbours — the engine's decode rate with 0, one per two cores and one
per core busy processes (a `while True` each), at 1 and 8 streams, for several thread settings.

llama.cpp's threads spin at every barrier, so one descheduled thread stalls the others: the settings differ
in how many threads decode and whether each is bound to a CPU of its own (never, while other processes are
busy, or always).

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
from modelport import machine as this_machine
from modelport.engines import llamacpp
from modelport.engines.llamacpp import thread_binding

CORES = this_machine.usable_cpus()
SETTINGS: dict[str, dict[str, Any]] = {
    f"{CORES} threads, never bound (before)": {"n_threads": CORES, "pin": False},
    f"{CORES} threads, bound while busy (the default)": {"n_threads": CORES},
    f"{CORES} threads, always bound": {"n_threads": CORES, "pin": True},
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


class Engine:
    """A process running `worker(setting)`."""

    def __init__(self, setting: str) -> None:
        command = [sys.executable, "-m", "bench.contention", "--setting", setting]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert self.process.stdout
        while self.process.stdout.readline().strip() != "ready":
            pass
        self.rate(1, 8)  # warm-up
        self.rate(8, 8)

    def rate(self, streams: int, tokens: int) -> float:
        assert self.process.stdin
        assert self.process.stdout
        self.process.stdin.write(f"{streams} {tokens}\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait()


@contextmanager
def busy(count: int) -> Iterator[None]:
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    time.sleep(3 * thread_binding.PERIOD if count else 0)  # for the threads to be bound
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
        time.sleep(3 * thread_binding.PERIOD if count else 0)  # for bound threads to be freed


def main(rounds: int, tokens: int) -> None:
    print(f"# Decode beside busy processes, {CORES} usable CPUs, median of {rounds} rounds\n\n{machine()}")
    # Every setting's engine waits in a process of its own, and each round measures them one after the other
    # under the same load, so that the machine's drift over the run falls on all of them alike.
    engines = {setting: Engine(setting) for setting in SETTINGS}
    rates: dict[tuple[str, int, int], list[float]] = {}
    for _ in range(rounds):
        for count in BUSY:
            with busy(count):
                for setting, engine in engines.items():
                    for streams in STREAMS:
                        rate = engine.rate(streams, tokens if streams == 1 else max(8, tokens // 2))
                        rates.setdefault((setting, count, streams), []).append(rate)
                    # The engine that just decoded is a busy neighbour to the next one's watcher.
                    time.sleep(3 * thread_binding.PERIOD)
    for engine in engines.values():
        engine.close()
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
