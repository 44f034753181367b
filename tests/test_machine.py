"""The engines' thread count: affinity and the cgroup's CPU quota, not the host's CPU count; numpy's BLAS
kept off the cores the engines own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from modelport import machine


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [("max 100000", None), ("50000 100000", 1), ("150000 100000", 2), ("100000000 100000", None), ("", None)],
)
def test_usable_cpus_follow_affinity_and_the_cgroup_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_max: str, expected: int | None
) -> None:
    affinity = len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text(cpu_max)
    monkeypatch.setattr(machine, "_CGROUP_CPU_MAX", tmp_path / "cpu.max")
    assert machine.usable_cpus() == min(expected or affinity, affinity)


def test_usable_cpus_follow_a_narrowed_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0})
    assert machine.usable_cpus() == 1


def test_a_process_s_age_counts_from_its_start() -> None:
    """What `serve` says it took to be ready: a process that slept 0.3 s before asking is as old at least."""
    script = "import time; time.sleep(0.3); from modelport import machine; print(machine.process_age())"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    age = float(done.stdout)
    assert 0.3 <= age < 30


def test_a_process_the_engines_own_holds_numpy_s_blas_to_one_thread() -> None:
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    if not blas:
        pytest.skip("numpy here has no BLAS thread pool")
    before = {pool["prefix"]: pool["num_threads"] for pool in blas}
    try:
        machine.one_blas_thread()
        assert {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"} == {1}
        assert np.ones((64, 64)) @ np.ones(64) == pytest.approx(np.full(64, 64.0))  # and still computes
    finally:
        threadpool_limits(limits=before)  # this worker's other tests keep theirs


# In a process of its own: in a test worker, the collections over the heap its run froze took 3 s.
FREEZES = """
import gc
from modelport import machine

gc.collect()
gc.freeze()  # a program that froze its own heap (as the test workers do)
frozen = gc.get_freeze_count()
made_since = [[n] for n in range(10_000)]  # what a server's start would freeze, were it to
machine.keep_out_of_collections()
assert gc.get_freeze_count() == frozen
machine.back_into_collections()  # a model unloaded: the program's freeze stays
assert gc.get_freeze_count() == frozen
gc.unfreeze()  # a program that froze nothing (`modelport serve`)
machine.keep_out_of_collections()
assert gc.get_freeze_count() >= len(made_since)
machine.back_into_collections()
assert gc.get_freeze_count() == 0
"""


def test_a_server_freezes_the_heap_only_where_the_program_has_not_and_unfreezes_only_its_own() -> None:
    done = subprocess.run([sys.executable, "-c", FREEZES], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
