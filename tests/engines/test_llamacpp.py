"""The llama.cpp engine as a predictor: streaming, cancellation, and its side door closed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from modelport.engines import llamacpp
from modelport.engines.llamacpp import thread_binding, xllamacpp_loader
from modelport.errors import InvalidRequestError

pytestmark = pytest.mark.models  # real models: not the unit tier


@pytest.fixture(scope="module")
def engine() -> tuple[object, object]:
    chat, completion = llamacpp.load(n_parallel=1, n_ctx_per_slot=2048)
    return chat, completion


def test_closing_the_iterator_stops_generation_within_a_token(engine: tuple[object, object]) -> None:
    chat, _ = engine
    stream = chat([{"role": "user", "content": "Count to one thousand."}], {"max_tokens": 1500})  # type: ignore[operator]
    next(stream)
    stream.close()
    # One slot only: if the first generation were still running, this would wait for 1500 tokens (~15 s).
    done = threading.Event()

    def second() -> None:
        chunks = list(chat([{"role": "user", "content": "Hi"}], {"max_tokens": 2}))  # type: ignore[operator]
        assert chunks
        done.set()

    worker = threading.Thread(target=second)
    worker.start()
    assert done.wait(timeout=5), "the closed generation kept its slot"


def test_a_prompt_longer_than_the_slot_is_a_context_error(engine: tuple[object, object]) -> None:
    _, completion = engine
    with pytest.raises(InvalidRequestError) as caught:
        list(completion("word " * 2500, {"max_tokens": 2}))  # type: ignore[operator]
    assert caught.value.code == "context_length_exceeded"
    assert "2048" in caught.value.message


def test_llama_cpp_own_http_listener_refuses_requests() -> None:
    server = llamacpp.start_server(n_parallel=1, n_ctx_per_slot=256)
    response = httpx.post(
        f"{server.listening_address}/v1/completions", json={"prompt": "hi", "max_tokens": 1}
    )
    assert response.status_code == 401
    assert server.handle_completions({"prompt": "hi", "max_tokens": 1})["choices"]


def test_the_weights_stay_in_the_file_s_mapping_unless_amx_copies_them(tmp_path: Path) -> None:
    # A file of its own: no other load of this process maps it.
    gguf = tmp_path / "model.gguf"
    shutil.copyfile(llamacpp.default_gguf(), gguf)
    server = llamacpp.start_server(str(gguf), n_parallel=1, n_ctx_per_slot=256)
    mapped = str(gguf) in Path("/proc/self/maps").read_text()
    copied = "AMX_INT8" in xllamacpp_loader.running().features.split()
    assert mapped is not copied
    assert server.handle_completions({"prompt": "hi", "max_tokens": 2})["choices"]


def test_decode_and_prompt_threads_are_separate_settings() -> None:
    server = llamacpp.start_server(n_parallel=1, n_ctx_per_slot=256, n_threads=1, n_threads_batch=2)
    reply = server.handle_completions({"prompt": "hi", "max_tokens": 2})
    assert reply["usage"]["completion_tokens"] >= 1


def _bound_threads() -> dict[int, int]:
    """This process's threads that are bound to one CPU, each with its CPU."""
    bound = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            cpus = os.sched_getaffinity(int(task.name))
        except OSError:  # a thread that ended meanwhile
            continue
        if len(cpus) == 1:
            bound[int(task.name)] = next(iter(cpus))
    return bound


def _newly_bound_cpus(before: dict[int, int]) -> set[int]:
    return {cpu for thread, cpu in _bound_threads().items() if thread not in before}


@pytest.mark.whole_machine
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="thread affinity is Linux's")
def test_pin_binds_each_thread_to_a_cpu_of_its_own() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    before = _bound_threads()
    server = llamacpp.start_server(n_parallel=1, n_ctx_per_slot=256, n_threads=len(allowed), pin=True)
    assert server.handle_completions({"prompt": "hi", "max_tokens": 2})["choices"]
    assert _newly_bound_cpus(before) == set(allowed)


@pytest.mark.alone  # bound only while the machine is busy: another worker's tests would keep it so
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="thread affinity is Linux's")
def test_threads_are_bound_while_another_process_is_busy_and_freed_after() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    # What is asserted first is "not bound on an idle machine": on one doing other work (not this suite's,
    # `alone` sees to that) the engine binds its threads, as it should, and the test cannot tell.
    first = thread_binding._Sample.now(allowed)
    time.sleep(1.0)
    others = thread_binding._Sample.now(allowed).others_since(first)
    if others >= thread_binding.CALM:
        pytest.skip(f"needs an idle machine: other processes keep {others:.2f} CPUs busy")
    server = llamacpp.start_server(n_parallel=1, n_ctx_per_slot=256, n_threads=len(allowed))  # pin "auto"
    before = _bound_threads()

    def decode_until(condition: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            server.handle_completions({"prompt": "Once upon a time", "max_tokens": 16, "ignore_eos": True})
            if condition():
                return True
        return False

    assert decode_until(lambda: True)
    assert not _newly_bound_cpus(before), "bound on an idle machine"
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in allowed[1:]]
    try:
        assert decode_until(lambda: _newly_bound_cpus(before) == set(allowed)), "not bound when busy"
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert decode_until(lambda: not _newly_bound_cpus(before)), "still bound after the neighbour ended"
