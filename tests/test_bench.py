"""Each benchmark is one command: it must at least start (imports, arguments) on every machine."""

from __future__ import annotations

import runpy
import sys

import pytest

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
    "access",
    "vector_stores",
    "reasoning",
    "flood",
    "recovery",
    "serving_cpu",
    "builds",
    "first_start",
    "workload",
    "neighbours",
    "second_turn",
    "start",
    "token_work",
    "after_busy",
]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_benchmark_command_starts(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", [f"bench.{name}", "--help"])
    with pytest.raises(SystemExit) as done:  # `python -m bench.NAME --help`, in this process
        runpy.run_module(f"bench.{name}", run_name="__main__")
    assert done.value.code == 0
    assert "Benchmark" in capsys.readouterr().out
