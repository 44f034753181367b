"""Each benchmark is one command: it must at least start (imports, arguments) on every machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


BENCHMARKS = [
    "decode",
    "concurrency",
    "embeddings",
    "audio",
    "overhead",
    "proxy",
    "state",
    "batch",
    "tools",
    "contention",
    "ray",
]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_benchmark_command_starts(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Benchmark" in done.stdout
