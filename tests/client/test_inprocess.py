"""The in-process client is the SDK's surface: its types, its exceptions, sync and async, no HTTP."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import threading
from collections.abc import Iterable

import openai
import pytest
from openai.types import CreateEmbeddingResponse, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import modelport
from modelport.settings import Settings
from tests.support.configs import NO_EOS


def test_models_are_an_sdk_page(inprocess_client: modelport.OpenAI) -> None:
    page = inprocess_client.models.list()
    models = list(page)
    assert all(isinstance(m, Model) for m in models)
    assert [m.id for m in page.data] == [m.id for m in models]
    assert inprocess_client.models.retrieve("tts-1").id == "piper-en-us"


def test_transport_options_are_accepted_and_not_gotten_in_the_way(inprocess_client: modelport.OpenAI) -> None:
    reply = inprocess_client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=2,
        timeout=30,
        extra_headers={"x-test": "1"},
        extra_body={"top_k": 1},
        temperature=openai.NOT_GIVEN,
    )
    assert isinstance(reply, ChatCompletion)


def test_errors_are_the_sdk_exception_classes(inprocess_client: modelport.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        inprocess_client.embeddings.create(model="missing", input="x")
    assert caught.value.status_code == 404
    assert caught.value.body == {
        "message": "The model `missing` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }


def test_closing_a_stream_early_frees_the_slot(inprocess_client: modelport.OpenAI) -> None:
    for _ in range(6):  # more than the model's four slots
        with inprocess_client.chat.completions.create(
            model="smollm2-135m-instruct",
            messages=[{"role": "user", "content": "Count to a thousand."}],
            max_tokens=2000,
            stream=True,
        ) as stream:
            first = next(iter(stream))
            assert isinstance(first, ChatCompletionChunk)
    reply = inprocess_client.chat.completions.create(
        model="smollm2-135m-instruct", messages=[{"role": "user", "content": "Hi"}], max_tokens=2
    )
    assert reply.choices


# A model of one slot that streams its answer (the user's words, reversed).
ONE_SLOT = Settings.model_validate(
    {
        "defaults": False,
        "models": [{"id": "r", "predictor": "tests.predictors.tiny_models:reverse_chat", "concurrency": 1}],
    }
)
ASK = {"model": "r", "messages": [{"role": "user", "content": "one two three"}]}


def test_a_stream_left_open_and_unread_frees_its_slot_when_its_work_ends() -> None:
    # A reader that stops reading without closing (a `break`, an exception while reading) keeps the stream:
    # read only as its reader asked, it held the model's slot as long, and the next call waited for ever.
    def answered(client: modelport.OpenAI) -> list[str | None]:
        """The next call's answer, if it came within 30 s (a thread of its own: a call that waits for ever
        fails the test, not hangs it)."""
        replies: list[str | None] = []
        call = threading.Thread(
            target=lambda: replies.append(client.chat.completions.create(**ASK).choices[0].message.content),
            daemon=True,
        )
        call.start()
        call.join(30)
        return replies

    def text(chunks: Iterable[ChatCompletionChunk]) -> str:
        return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)

    with modelport.OpenAI(settings=ONE_SLOT) as client:
        for read in (0, 2):  # never read, or read in part
            left = client.chat.completions.create(**ASK, stream=True)
            started = list(itertools.islice(left, read))
            assert answered(client) == ["three two one"]
            assert text(started) + text(left) == "three two one"  # what the stream still holds, whole

    async def run() -> None:
        async with modelport.AsyncOpenAI(settings=ONE_SLOT) as client:
            left = await client.chat.completions.create(**ASK, stream=True)
            await anext(aiter(left))
            reply = await asyncio.wait_for(client.chat.completions.create(**ASK), 30)
            assert reply.choices[0].message.content == "three two one"
            await left.close()

    asyncio.run(run())


def test_a_caller_cancelled_while_a_stream_closes_is_cancelled() -> None:
    # Closing a stream cancels its work and waits for it: a caller cancelled meanwhile (a `wait_for`'s
    # deadline, a task group's end) once had its cancellation taken for the work's, and went on.
    async def run() -> None:
        async with modelport.AsyncOpenAI(settings=ONE_SLOT) as client:
            stream = await client.chat.completions.create(**ASK, stream=True)
            await anext(aiter(stream))
            closing = asyncio.create_task(stream.close())
            await asyncio.sleep(0)  # the close has cancelled the work and waits for it to end
            closing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing
            assert (await client.chat.completions.create(**ASK)).choices[0].message.content == "three two one"

    asyncio.run(run())


LEAVES_MID_STREAM = """
import modelport
client = modelport.OpenAI()
for _ in range(2):  # two generations under way, neither read to its end nor closed
    stream = client.chat.completions.create(
        model="smollm2-135m-instruct",
        messages=[{"role": "user", "content": "Count to a thousand."}],
        max_tokens=4000,
        logit_bias=%r,
        stream=True,
    )
    next(iter(stream))
print("left", flush=True)
"""


@pytest.mark.models  # SmolLM2, in the program the test runs
def test_a_program_that_ends_mid_stream_exits_cleanly() -> None:
    """A program may end while its streams still generate: they are closed while the client's loop runs,
    and llama.cpp's threads stopped and waited for, where they were once unwound inside llama.cpp as Python
    finalised and the process aborted (exit 134)."""
    done = subprocess.run(
        [sys.executable, "-c", LEAVES_MID_STREAM % (NO_EOS,)], capture_output=True, text=True, timeout=300
    )
    assert done.stdout.strip() == "left", done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]  # the streams closed, not torn down


@pytest.mark.slow
def test_async_client_has_the_same_surface() -> None:
    async def run() -> None:
        async with modelport.AsyncOpenAI(service=None) as client:
            embedding = await client.embeddings.create(model="text-embedding-3-small", input=["a", "b"])
            assert isinstance(embedding, CreateEmbeddingResponse)
            stream = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], max_tokens=3, stream=True
            )
            chunks = [chunk async for chunk in stream]
            assert chunks
            assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
            concurrent = await asyncio.gather(
                *(client.embeddings.create(model="all-minilm-l6-v2", input=f"text {i}") for i in range(4))
            )
            assert len(concurrent) == 4
            with pytest.raises(openai.BadRequestError):
                await client.audio.speech.create(model="tts-1", voice="alloy", input="")

    asyncio.run(run())
