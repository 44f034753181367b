"""Benchmark: how soon a server started on a chat model answers — `modelport serve` on that model alone
against llama-server on the same GGUF (same threads, slots and context), each started afresh, in turn,
every round. Timed from the command: its port accepting connections, `/health` answering 200, and the
first answer to a one-token chat request; then that first request's own time against the same request
sent again (what a server does once, at its first request, beside what every request does). modelport's
store is a new SQLite file in a folder of the benchmark's, kept across its rounds as a user's is.

    .venv/bin/python -m bench.start [--rounds 5] [--model smollm2|gemma3-270m]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from bench import references
from bench.common import MODELS, THREADS, bench_model, machine, median, rotated, scratch, table
from bench.decode import N_CTX, SLOTS, config
from tests.support.live import free_port

_MARKS = ("listening", "ready", "first answer", "first request", "same request again")


def timed_start(command: Sequence[str], port: int, model: str, data: Path) -> dict[str, float]:
    """Start `command` (a server on `port`; modelport's store in `data`) and time it to each mark, in
    seconds; the server is stopped."""
    began = time.monotonic()
    environment = {**os.environ, "MODELPORT_DATA_DIR": str(data)}
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment)
    marks: dict[str, float] = {}
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError(f"{command[0]} ended before it listened") from None
                time.sleep(0.005)
        marks["listening"] = time.monotonic() - began
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=120) as client:
            while client.get(f"{url}/health").status_code != 200:
                time.sleep(0.005)
            marks["ready"] = time.monotonic() - began
            body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
            for mark in ("first request", "same request again"):
                sent = time.monotonic()
                client.post(f"{url}/v1/chat/completions", json=body).raise_for_status()
                marks[mark] = time.monotonic() - sent
                marks.setdefault("first answer", time.monotonic() - began)
    finally:
        server.terminate()
        server.wait(30)
    return marks


def main(rounds: int, name: str) -> None:
    model = bench_model(name)
    print(f"# A server's start on {model.gguf.name}, medians of {rounds} rounds\n\n{machine()}")
    folder = scratch("start")
    (folder / "models.toml").write_text(config(model))

    def modelport(port: int) -> list[str]:
        return [sys.executable, "-m", "modelport.cli", "serve", "--config", str(folder / "models.toml"),
                "--port", str(port), "--log-level", "warning"]  # fmt: skip

    servers: dict[str, Callable[[int], list[str]]] = {"modelport": modelport}
    binary = references.llama_server()
    if binary is None:
        print("\nllama-server: not built (python -m bench.references, ~25 min); its row is absent.")
    else:
        servers["llama-server"] = lambda port: [
            str(binary), "-m", str(model.gguf), "--port", str(port), "-t", str(THREADS), "-tb", str(THREADS),
            "-np", str(SLOTS), "-c", str(N_CTX), "--kv-unified", "-ngl", "0", "--log-disable",
        ]  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {server: [] for server in servers}
    for i in range(rounds):
        for server in rotated(list(servers), i):
            port = free_port()
            results[server].append(timed_start(servers[server](port), port, model.id, folder))
    ms = {server: [median([m[k] for m in marks]) * 1000 for k in _MARKS] for server, marks in results.items()}
    rows: list[list[object]] = [[server, *values] for server, values in ms.items()]
    if "llama-server" in ms:
        ratios = zip(ms["modelport"], ms["llama-server"], strict=True)
        rows.append(["modelport ÷ llama-server", *(f"{a / b:.2f}" for a, b in ratios)])
    print(table("Start, ms (from the command)", ["server", *_MARKS], rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", choices=MODELS, default=MODELS[0])
    arguments = parser.parse_args()
    main(arguments.rounds, arguments.model)
