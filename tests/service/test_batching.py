"""Concurrent embedding callers share predictor calls, and callers wait (within a bound) for a model that
is still loading; both with a tiny trigram model built in the tests."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Annotated

import numpy as np
import openai
import pytest

import modelport
from modelport import Parameter
from modelport.predictors.contract import Predictor, check_predictor
from modelport.predictors.registry import ModelRegistry, ModelSpec
from modelport.service import Service
from modelport.settings import Settings
from tests.predictors.tiny_models import trigram_embed

TEXTS = [f"sentence number {i} about {'cats' if i % 2 else 'the sea'}" for i in range(16)]


def test_concurrent_callers_are_batched_and_each_gets_its_own_rows() -> None:
    batches: list[int] = []

    def embed(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
        batches.append(len(texts))
        time.sleep(0.02)  # a model takes time; callers arriving meanwhile join the next batch
        return trigram_embed(texts)

    registry = ModelRegistry()
    registry.add_predictor("trigram", embed)

    async def callers() -> list[list[list[float]]]:
        async with modelport.AsyncOpenAI(service=Service(registry)) as client:
            replies = await asyncio.gather(
                *(client.embeddings.create(model="trigram", input=[text]) for text in TEXTS)
            )
        return [[row.embedding for row in reply.data] for reply in replies]

    results = asyncio.run(callers())
    assert sum(batches) == len(TEXTS)
    assert len(batches) < len(TEXTS) / 2
    for text, rows in zip(TEXTS, results, strict=True):
        np.testing.assert_allclose(rows, trigram_embed([text]), rtol=1e-6)


def slow_spec(seconds: float, loads: list[float]) -> ModelSpec:
    def load() -> Sequence[Predictor]:
        loads.append(time.monotonic())
        time.sleep(seconds)
        return [check_predictor(trigram_embed)]

    return ModelSpec("slow", load, "a model that takes its time to load")


def test_callers_wait_for_a_loading_model_which_loads_once() -> None:
    loads: list[float] = []
    registry = ModelRegistry()
    registry.add(slow_spec(0.3, loads))  # the four callers all arrive while it loads

    async def callers() -> list[int]:
        async with modelport.AsyncOpenAI(service=Service(registry, Settings(preload=False))) as client:
            replies = await asyncio.gather(
                *(client.embeddings.create(model="slow", input="hello") for _ in range(4))
            )
        return [len(r.data) for r in replies]

    assert asyncio.run(callers()) == [1, 1, 1, 1]
    assert len(loads) == 1


def test_past_the_load_wait_a_caller_gets_503_and_the_load_goes_on() -> None:
    loads: list[float] = []
    registry = ModelRegistry()
    registry.add(slow_spec(0.4, loads))
    client = modelport.OpenAI(service=Service(registry, Settings(preload=False, load_wait=0.1)))
    try:
        with pytest.raises(openai.InternalServerError) as caught:
            client.embeddings.create(model="slow", input="hello")
        assert caught.value.status_code == 503
        assert caught.value.response.headers["retry-after"] == "5"
        assert caught.value.body["code"] == "model_loading"  # type: ignore[index]
        time.sleep(0.5)  # the load is done (and a request still finding it loading waits its 0.1 s)
        assert client.embeddings.create(model="slow", input="hello").data
        assert len(loads) == 1
    finally:
        client.close()
    assert threading.active_count() < 50


def test_a_live_caller_waits_for_one_small_background_call_not_for_an_ingest() -> None:
    """A vector store's ingest feeds the model in small background calls, and a live request arriving
    meanwhile is embedded alone in the very next call (it was folded into the ingest's next 64)."""
    live = "a live question"
    made: list[tuple[int, bool]] = []  # per predictor call: its texts, whether the live one is among them
    running = threading.Event()
    go = threading.Event()

    def embed(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
        made.append((len(texts), live in texts))
        if len(made) == 1:  # the ingest's first call holds the model until the live caller is in line
            running.set()
            go.wait(10)
        return trigram_embed(texts)

    registry = ModelRegistry()
    registry.add_predictor("trigram", embed)
    paragraphs = "\n\n".join(
        f"Paragraph {i} tells of {'cats' if i % 2 else 'the sea'}." * 12 for i in range(200)
    )

    async def run() -> tuple[str, list[float]]:
        async with modelport.AsyncOpenAI(service=Service(registry)) as client:
            upload = await client.files.create(file=("many.txt", paragraphs.encode()), purpose="assistants")
            store = await client.vector_stores.create(
                name="big",
                file_ids=[upload.id],
                chunking_strategy={
                    "type": "static",
                    "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0},
                },
                extra_body={"embedding_model": "trigram"},
            )
            assert await asyncio.to_thread(running.wait, 10)
            asked = asyncio.create_task(client.embeddings.create(model="trigram", input=[live]))
            await asyncio.sleep(0.1)  # in line behind the running call
            go.set()
            answer = await asked
            ingested = client.vector_stores.files.poll(
                upload.id, vector_store_id=store.id, poll_interval_ms=50
            )
            return (await asyncio.wait_for(ingested, 60)).status, answer.data[0].embedding

    status, row = asyncio.run(run())
    assert status == "completed"
    np.testing.assert_allclose(row, trigram_embed([live])[0], rtol=1e-6)
    assert made[1] == (1, True)  # alone, right after the call it found running
    background = [n for n, with_live in made if not with_live]
    assert sum(background) > 64  # an ingest of more than one of its own batches
    assert max(background) <= 16
