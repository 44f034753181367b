"""A predictor that hangs gets a 504 after its model's timeout, in one call or between streamed chunks, and
the other models keep serving; tiny predictors built here."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any

import numpy as np
import openai
import pytest

import modelport
from modelport import Parameter
from modelport.predictors.registry import ModelRegistry
from modelport.service import Service
from tests.predictors.tiny_models import trigram_embed
from tests.support.machine_load import slack

RELEASE = threading.Event()


def stuck_embed(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
    RELEASE.wait(30)
    return trigram_embed(texts)


def stalling_chat(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}]}
    RELEASE.wait(30)
    yield {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]}


@pytest.fixture
def sdk() -> Iterator[modelport.OpenAI]:
    RELEASE.clear()
    registry = ModelRegistry()
    registry.add_predictor("stuck", stuck_embed, timeout=0.5)
    registry.add_predictor("stalling", stalling_chat, timeout=0.5)
    registry.add_predictor("fine", trigram_embed)
    sdk = modelport.OpenAI(service=Service(registry))
    yield sdk
    RELEASE.set()
    sdk.close()


def test_a_hung_call_is_a_504_and_other_models_keep_serving(sdk: modelport.OpenAI) -> None:
    start = time.monotonic()
    with pytest.raises(openai.APIStatusError) as caught:
        sdk.embeddings.create(model="stuck", input="x")
    assert caught.value.status_code == 504
    assert caught.value.body["code"] == "timeout"  # type: ignore[index]
    assert "stuck_embed" in caught.value.message
    assert time.monotonic() - start < 5 * slack()
    assert sdk.embeddings.create(model="fine", input="x").data


def test_a_stream_that_stalls_ends_with_a_timeout(sdk: modelport.OpenAI) -> None:
    stream = sdk.chat.completions.create(
        model="stalling", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    pieces = iter(stream)
    assert next(pieces).choices[0].delta.content == "Hel"
    with pytest.raises(openai.APIStatusError) as caught:
        next(pieces)
    assert caught.value.status_code == 504
