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
    registry.add(slow_spec(1.0, loads))

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
    registry.add(slow_spec(1.5, loads))
    client = modelport.OpenAI(service=Service(registry, Settings(preload=False, load_wait=0.2)))
    try:
        with pytest.raises(openai.InternalServerError) as caught:
            client.embeddings.create(model="slow", input="hello")
        assert caught.value.status_code == 503
        assert caught.value.response.headers["retry-after"] == "5"
        assert caught.value.body["code"] == "model_loading"  # type: ignore[index]
        time.sleep(1.6)
        assert client.embeddings.create(model="slow", input="hello").data
        assert len(loads) == 1
    finally:
        client.close()
    assert threading.active_count() < 50
