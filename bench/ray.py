"""Benchmark: what the Ray runtime costs — embeddings per second and aggregate chat decode through
`modelport serve --ray` (one and two replicas of each model) against plain `modelport serve` on the same
machine, with start-up time and the memory of every process each one runs.

    .venv/bin/python -m bench.ray [--seconds 15] [--streams 4] [--tokens 64]

Needs the ray extra (`pip install -e '.[ray]'`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from bench.common import STORY, free_port, http_client, machine, scratch, serving, table
from bench.concurrency import aggregate

TEXTS = [f"{i}. {STORY[: 40 + i % 80]}" for i in range(16)]


def config(replicas: int) -> str:
    """The chat and embedding models, each with `replicas` Ray replicas of half a CPU (a plain server runs
    one of each and ignores the Ray keys)."""
    return f"""
defaults = false

[[models]]
id = "chat"
engine = "llamacpp"
n_ctx = 4096
n_parallel = 4
n_threads = 1
replicas = {replicas}
num_cpus = 0.5

[[models]]
id = "embed"
engine = "onnx-embedding"
n_threads = 1
replicas = {replicas}
num_cpus = 0.5
"""


async def embeddings_per_second(url: str, seconds: float, clients: int = 8) -> float:
    """Texts embedded per second by `clients` callers sending batches of 16 for `seconds`."""
    client = http_client(url)
    await client.embeddings.create(model="embed", input=TEXTS)  # warm-up
    done = 0
    stop = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await client.embeddings.create(model="embed", input=TEXTS)
            done += len(TEXTS)

    start = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(clients)))
    return done / (time.perf_counter() - start)


def tree_rss_mib(root: int) -> float:
    """RSS of a process and all its descendants (Ray's raylet, GCS and workers are the server's)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")), 0)
    return total / 1024


def measure(replicas: int, ray: bool, args: argparse.Namespace) -> dict[str, float]:
    path = scratch("ray") / "models.toml"
    path.write_text(config(replicas))
    port = free_port()
    command = [sys.executable, "-m", "modelport.cli", "serve", "--port", str(port), "--log-level", "warning"]
    command += ["--config", str(path), *(["--ray"] if ray else [])]
    start = time.perf_counter()
    with serving(command, "/health", port, "modelport") as (url, pid):
        ready = time.perf_counter() - start
        rss = tree_rss_mib(pid)
        texts = asyncio.run(embeddings_per_second(url, args.seconds))
        tokens, _ = asyncio.run(aggregate(url, "chat", args.streams, args.tokens))
    return {"ready": ready, "rss": rss, "texts": texts, "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds of embedding load per run")
    parser.add_argument("--streams", type=int, default=4, help="concurrent chat streams")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per chat stream")
    args = parser.parse_args()
    plain = measure(1, False, args)
    rows = [
        [
            "plain modelport serve",
            "-",
            *(round(plain[k], 1) for k in ("ready", "rss", "texts", "tokens")),
            "1",
            "1",
        ]
    ]
    for replicas in (1, 2):
        on_ray = measure(replicas, True, args)
        rows.append(
            [
                "modelport serve --ray",
                replicas,
                *(round(on_ray[k], 1) for k in ("ready", "rss", "texts", "tokens")),
                f"{on_ray['texts'] / plain['texts']:.2f}",
                f"{on_ray['tokens'] / plain['tokens']:.2f}",
            ]
        )
    headers = [
        "server",
        "replicas",
        "ready s",
        "RSS MiB",
        "texts/s",
        "chat tok/s",
        "texts vs plain",
        "tok vs plain",
    ]
    print(machine())
    print(table(f"Ray runtime cost ({args.streams} chat streams of {args.tokens} tokens)", headers, rows))
    print("\ntarget: ≥ 0.85× plain for both, with one and with two replicas")


if __name__ == "__main__":
    main()
