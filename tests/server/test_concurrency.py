"""Many users at once, over HTTP: concurrent streams decode side by side, a client that leaves frees its
slot at once, a full queue answers 429 with Retry-After, and a later turn reuses the cached prefix."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from modelport.settings import Settings
from tests.support.configs import NO_EOS
from tests.support.faces import Faces, faces
from tests.support.machine_load import slack

pytestmark = pytest.mark.models  # real models: not the unit tier

ONE_SLOT = """
defaults = false

[[models]]
id = "one-slot"
engine = "llamacpp"
n_parallel = 1
n_ctx_per_slot = 2048
queue = 1
"""


@pytest.fixture(scope="module")
def one_slot() -> Iterator[openai.OpenAI]:
    with faces(Settings.model_validate(tomllib.loads(ONE_SLOT))) as served:
        yield served.http


@pytest.mark.slow
def test_eight_streams_decode_side_by_side(server: Faces) -> None:
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120)

    async def one(i: int, start: float) -> tuple[float, float, int]:
        stream = await client.completions.create(
            model="smollm2-135m-instruct",
            prompt=f"{i}. Once upon a time",
            max_tokens=40,
            temperature=0,
            logit_bias=NO_EOS,
            stream=True,
        )
        first, tokens = 0.0, 0
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].text:
                tokens += 1
                first = first or time.perf_counter() - start
        return first, time.perf_counter() - start, tokens

    async def together() -> list[tuple[float, float, int]]:
        start = time.perf_counter()
        return list(await asyncio.gather(*(one(i, start) for i in range(8))))

    results = asyncio.run(together())
    firsts, ends, tokens = zip(*results, strict=True)
    assert set(tokens) == {40}
    # Side by side, not a staircase: every stream has begun before any ends, and they end together.
    assert max(firsts) < min(ends)
    assert max(ends) <= 1.5 * min(ends)


def test_a_client_that_leaves_frees_the_only_slot_at_once(one_slot: openai.OpenAI) -> None:
    for _ in range(3):
        stream = one_slot.completions.create(
            model="one-slot", prompt="Count:", max_tokens=1500, logit_bias=NO_EOS, stream=True
        )
        next(iter(stream))
        stream.close()
    # The abandoned generations would hold the one slot for ~20 s each; the next request starts at once.
    start = time.perf_counter()
    reply = one_slot.completions.create(model="one-slot", prompt="Hi", max_tokens=1)
    assert reply.choices
    assert time.perf_counter() - start < 2 * slack()


def test_an_abandoned_non_streaming_request_frees_the_slot_at_once(one_slot: openai.OpenAI) -> None:
    # An SDK that times out a non-streaming request and leaves (then retries) must not leave the generation
    # running: the slot is free again (metrics say so) right after the client goes.
    impatient = one_slot.with_options(timeout=0.5)
    metrics = str(one_slot.base_url).removesuffix("/v1/") + "/metrics"

    def active() -> float:
        for line in httpx.get(metrics).text.splitlines():
            if line.startswith('modelport_slots_active{model="one-slot"}'):
                return float(line.split()[-1])
        raise AssertionError("no slot gauge for one-slot")

    for _ in range(3):
        with pytest.raises(openai.APITimeoutError):
            impatient.completions.create(
                model="one-slot", prompt="Count:", max_tokens=1500, logit_bias=NO_EOS
            )
        left = time.perf_counter()
        while active() and time.perf_counter() - left < 5:
            time.sleep(0.01)
        assert time.perf_counter() - left < 0.5 * slack(), "the slot stayed busy after its client left"
    start = time.perf_counter()
    assert one_slot.completions.create(model="one-slot", prompt="Hi", max_tokens=1).choices
    assert time.perf_counter() - start < 2 * slack()


def test_past_the_queue_bound_a_request_gets_429_with_retry_after(one_slot: openai.OpenAI) -> None:
    holding = one_slot.completions.create(
        model="one-slot", prompt="Count:", max_tokens=1500, logit_bias=NO_EOS, stream=True
    )
    next(iter(holding))  # the one slot is taken
    queued: list[object] = []
    waiter = threading.Thread(
        target=lambda: queued.append(one_slot.completions.create(model="one-slot", prompt="Hi", max_tokens=1))
    )
    waiter.start()  # the one place in the queue is taken
    time.sleep(1)
    try:
        with pytest.raises(openai.RateLimitError) as caught:
            one_slot.completions.create(model="one-slot", prompt="Hi", max_tokens=1)
        assert int(caught.value.response.headers["retry-after"]) >= 1
        assert caught.value.body["type"] == "rate_limit_error"  # type: ignore[index]
        assert caught.value.body["code"] == "rate_limit_exceeded"  # type: ignore[index]
    finally:
        holding.close()
    waiter.join(timeout=30)
    assert queued, "the queued request did not run once the slot was free"


def test_a_follow_up_turn_reuses_the_cached_conversation(http_client: openai.OpenAI) -> None:
    messages: list[dict[str, str]] = [
        {"role": "system", "content": "You are a helpful assistant who answers in one short sentence. " * 8},
        {"role": "user", "content": "Name a fruit."},
    ]
    first = http_client.chat.completions.create(model="gpt-4o-mini", messages=messages, max_tokens=12)  # type: ignore[arg-type]
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content or ""},
        {"role": "user", "content": "And a vegetable?"},
    ]
    second = http_client.chat.completions.create(model="gpt-4o-mini", messages=messages, max_tokens=12)  # type: ignore[arg-type]
    assert first.usage
    assert second.usage
    assert second.usage.prompt_tokens_details
    assert second.usage.prompt_tokens_details.cached_tokens
    # Turn 2 re-processes only what turn 1 did not already have (its answer and the new question).
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 2


def test_clients_that_leave_mid_upload_leave_nothing_behind(server: Faces) -> None:
    def threads() -> int:
        return len(list(Path(f"/proc/{server.pid}/task").iterdir()))

    httpx.post(f"{server.url}/v1/models")  # warm: the server's thread pool has its usual size
    before = threads()
    host, port = server.url.removeprefix("http://").split(":")
    for _ in range(10):
        with socket.create_connection((host, int(port))) as raw:
            raw.sendall(
                b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: localhost\r\n"
                b"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 10000000\r\n\r\n"
                b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
                + b"\0"
                * 200_000
            )
    time.sleep(1)
    assert threads() <= before + 2
    assert httpx.get(f"{server.url}/v1/models").status_code == 200
