"""How the suite's workers (pytest-xdist, `-n auto` in pyproject.toml) share the machine, as a plugin that
tests/conftest.py loads: how many workers, which CPUs each runs on, which tests one worker runs together,
and the turns of `whole_machine` and `alone` tests."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from modelport import machine

_WORKER = os.environ.get("PYTEST_XDIST_WORKER")

# Several workers (pytest-xdist, `-n auto` in pyproject.toml): each is given its share of the CPUs, so that
# the engines of one never spin against another's at llama.cpp's barriers (two workers' 2-thread decodes on 2
# CPUs crawl), and a worker waiting on a server's start leaves its CPU to the other.
_MACHINE_CPUS = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()


class _ByFile(LoadScopeScheduling):
    """One worker runs a whole file (its module fixtures start once), and every Ray test (one Ray instance
    a machine). (xdist's own `loadgroup` cannot say so under pytest 9: it renames items by a field pytest no
    longer reads.)"""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::")[0]
        return "ray" if path.startswith("tests/cluster/") else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> _ByFile:
    return _ByFile(config, log)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker a CPU, as many as memory holds (each loads the default models: 8 GiB a worker
    leaves room for the servers and replicas the tests start), at most 8."""
    return max(1, min(machine.usable_cpus(), machine.total_memory() // (8 << 30), 8))


def pytest_configure(config: pytest.Config) -> None:
    # Registered first, so run last, as the interpreter is about to be finalised: its collections would then
    # walk the half-million objects a worker holds (the SDKs' models, the modules) two seconds long, only to
    # free what the process's end frees anyway. Frozen, they are left out of those collections; threads are
    # still joined and native destructors still run (an engine that aborts at exit still fails the run).
    atexit.register(gc.freeze)
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if _WORKER and _MACHINE_CPUS and count > 1:
        cpus, index = sorted(_MACHINE_CPUS), int(_WORKER.removeprefix("gw"))
        os.sched_setaffinity(0, cpus[index % len(cpus) :: count] or cpus)


# The workers' turns on the machine: lock files of the run, made where it starts (its workers inherit this)
# and removed there as it ends.
_MADE_TURNS = "MODELPORT_TEST_TURNS" not in os.environ
if _MADE_TURNS:
    os.environ["MODELPORT_TEST_TURNS"] = tempfile.mkdtemp(prefix="modelport-test-turns-")
_TURNS = Path(os.environ["MODELPORT_TEST_TURNS"])


def pytest_unconfigure() -> None:
    if _MADE_TURNS:
        shutil.rmtree(_TURNS, ignore_errors=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collecting made (the modules, the SDKs' models, the tests) is kept out of the collector's full
    passes from here on: each walked all of it, 0.3 s a pass, and the tests made 20-30 of them a worker
    (every server a test starts freezes its own start-up the same way, `machine.keep_out_of_collections`,
    which leaves this freeze alone)."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """A `whole_machine` test (thread placement, a 2-CPU Ray instance) runs on every CPU of the machine,
    whatever its worker's share (what it starts keeps them); an `alone` test, with no other test running."""
    alone = item.get_closest_marker("alone") is not None
    share = os.sched_getaffinity(0) if _MACHINE_CPUS else set()
    wide = alone or item.get_closest_marker("whole_machine") is not None
    widen = wide and share not in (set(), _MACHINE_CPUS)
    with _turn(alone) if _WORKER else contextlib.nullcontext():
        if widen:
            os.sched_setaffinity(0, _MACHINE_CPUS)
        try:
            return (yield)
        finally:
            if widen:
                os.sched_setaffinity(0, share)


@contextlib.contextmanager
def _turn(alone: bool) -> Iterator[None]:
    """A readers-writer lock over the workers, with a turnstile so that an `alone` test waiting for the
    machine is not passed by the other workers' next tests: they each hold `machine` shared while a test
    runs, an `alone` test holds it exclusively. POSIX record locks, which are the process's own: a `flock`
    lives as long as its file's descriptor, which a process forked during the test (a pool's worker) keeps
    open after the test, holding the machine for ever."""
    with open(_TURNS / "gate", "a+") as gate, open(_TURNS / "machine", "a+") as room:
        fcntl.lockf(gate, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.lockf(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.lockf(gate, fcntl.LOCK_UN)
        yield
