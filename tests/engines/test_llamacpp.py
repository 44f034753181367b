"""The llama.cpp engine as a predictor: streaming, cancellation, and its side door closed."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import httpx
import pytest

from modelport.engines import llamacpp
from modelport.errors import InvalidRequestError


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


def test_decode_and_prompt_threads_and_polling_are_separate_settings() -> None:
    server = llamacpp.start_server(n_parallel=1, n_ctx_per_slot=256, n_threads=1, n_threads_batch=2, poll=0)
    reply = server.handle_completions({"prompt": "hi", "max_tokens": 2})
    assert reply["usage"]["completion_tokens"] >= 1


def _single_cpu_threads() -> set[int]:
    """The CPUs that this process's threads bound to one CPU each are bound to."""
    bound = set()
    for status in Path("/proc/self/task").glob("*/status"):
        try:
            allowed = next(
                line.split(":")[1].strip()
                for line in status.read_text().splitlines()
                if line.startswith("Cpus_allowed_list")
            )
        except (OSError, StopIteration):  # a thread that ended meanwhile
            continue
        if allowed.isdigit():
            bound.add(int(allowed))
    return bound


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="thread affinity is Linux's")
def test_pin_binds_each_thread_to_a_cpu_of_its_own() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    before = _single_cpu_threads()
    server = llamacpp.start_server(n_parallel=1, n_ctx_per_slot=256, n_threads=len(allowed), pin=True)
    assert server.handle_completions({"prompt": "hi", "max_tokens": 2})["choices"]
    assert _single_cpu_threads() - before == set(allowed) - before
