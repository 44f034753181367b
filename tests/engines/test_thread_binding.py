"""Binding llama.cpp's threads one to a CPU: the placement itself, on real threads of this process."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest

from modelport.engines.llamacpp.thread_binding import _EngineThreads

pytestmark = [
    pytest.mark.whole_machine,
    pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="thread affinity is Linux's"),
]


@pytest.fixture
def threads() -> Iterator[list[int]]:
    """Three parked threads of this process, by native id."""
    if len(os.sched_getaffinity(0)) < 2:  # here, not at import: a worker's share of the CPUs is wider now
        pytest.skip("needs 2 CPUs")
    release = threading.Event()
    started = [threading.Thread(target=release.wait, daemon=True) for _ in range(3)]
    for thread in started:
        thread.start()
    yield [thread.native_id or 0 for thread in started]
    release.set()


def test_active_threads_get_cpus_of_their_own_whatever_an_idle_bound_thread_holds(threads: list[int]) -> None:
    # llama.cpp's HTTP listener ran once and was bound to the first CPU; then its two decode threads
    # were both bound to the other (round robin over what was left), and spun for each other's time
    # slice at every barrier: 3 s a token.
    allowed = sorted(os.sched_getaffinity(0))[:2]
    listener, first, second = threads
    engine = _EngineThreads(set(threads), allowed)
    engine.bind([listener])
    engine.bind([first, second])
    assert os.sched_getaffinity(first) != os.sched_getaffinity(second)
    assert {*os.sched_getaffinity(first), *os.sched_getaffinity(second)} == set(allowed)
    engine.bind([first, second])  # a later look moves nothing that is placed well
    assert {engine.bound[first], engine.bound[second]} == set(allowed)
    engine.free()
    assert all(os.sched_getaffinity(thread) == set(os.sched_getaffinity(0)) for thread in threads)


def test_threads_that_run_most_get_cpus_of_their_own_before_one_bound_earlier(threads: list[int]) -> None:
    # A turn's save woke the main decode thread and the HTTP listener, each bound to a CPU of its own; the
    # next prompt's worker thread then woke too (looks list the busiest first): it takes the listener's
    # CPU, not the main thread's, with which it would spin for its time slice at every barrier.
    allowed = sorted(os.sched_getaffinity(0))[:2]
    listener, main, worker = threads
    engine = _EngineThreads(set(threads), allowed)
    engine.bind([main, listener])
    engine.bind([main, worker, listener])
    assert engine.bound[main] != engine.bound[worker]
    assert {*os.sched_getaffinity(main), *os.sched_getaffinity(worker)} == set(allowed)
    engine.free()
