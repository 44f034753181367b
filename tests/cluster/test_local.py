"""Deployments on Ray Serve's local testing mode (in this process, milliseconds): building them from
models.toml settings, contract errors before anything deploys, relaying whole and streamed answers and
errors, a replica that dies mid-answer turned into an explicit error, and one that fails before it begins
retried."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import Any

import numpy as np
import openai
import pytest

import modelport
from modelport import cluster
from modelport.cluster.ingress import ReplicaSet
from modelport.cluster.replica import END, ModelReplica
from modelport.errors import PredictorContractError
from modelport.service import Service
from modelport.settings import ModelConfig, Settings

SETTINGS = Settings.model_validate(
    {
        "defaults": False,
        "store": {"url": "none"},
        "aliases": {"gpt-4o-mini": "reverse"},
        "models": [
            {"id": "reverse", "predictor": "tests.predictors.tiny_models:reverse_chat", "replicas": 2},
            {
                "id": "trigrams",
                "predictor": "tests.predictors.tiny_models:trigram_embed",
                "autoscaling": {"min": 1, "max": 3, "target_ongoing_requests": 4},
                "num_cpus": 0.25,
            },
        ],
    }
)


@pytest.fixture(scope="module")
def sdk() -> Iterator[modelport.OpenAI]:
    registry = cluster.deploy(SETTINGS, local_testing=True)
    with modelport.OpenAI(service=Service(registry, SETTINGS)) as local:
        yield local


def test_models_are_deployments_with_their_capabilities(sdk: modelport.OpenAI) -> None:
    models = {m.id: m for m in sdk.models.list()}
    assert list(models) == ["reverse", "trigrams"]
    assert models["reverse"].capabilities == ["chat"]  # type: ignore[attr-defined]
    spec = sdk.service.manager.registry.resolve("trigrams")
    assert spec.source == "ray deployment `trigrams`"
    assert spec.concurrency == 16 * 3  # a replica's share times the most replicas autoscaling allows


def test_whole_and_streamed_answers_come_through_the_handle(sdk: modelport.OpenAI) -> None:
    whole = sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a b c"}])
    assert whole.choices[0].message.content == "c b a"
    assert whole.model == "reverse"  # the id the alias names, as every model answers
    stream = sdk.chat.completions.create(
        model="reverse", messages=[{"role": "user", "content": "one two three"}], stream=True
    )
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert pieces == ["three", " two", " one"]
    vectors = sdk.embeddings.create(model="trigrams", input=["cat", "cats", "dog"])
    near, far = (np.dot(vectors.data[0].embedding, vectors.data[i].embedding) for i in (1, 2))
    assert near > far


def test_a_replica_error_is_the_same_error(sdk: modelport.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="reverse", messages=[], max_tokens=2)
    assert caught.value.status_code == 400


def test_a_predictor_that_cannot_be_imported_fails_before_deploying() -> None:
    broken = SETTINGS.model_copy(
        update={"models": [ModelConfig(id="gone", predictor="tests.predictors.tiny_models:nothing_here")]}
    )
    with pytest.raises(PredictorContractError, match="model `gone`: cannot import"):
        cluster.deploy(broken, local_testing=True)


class DyingReplica(ModelReplica):
    """Dies (its stream just ends, as Ray ends a dead replica's) after `after` items; before the first one
    when `after` is 0, but only on its first call."""

    calls = 0

    async def call(self, *args: Any, **kwargs: Any) -> AsyncGenerator[tuple[str, Any], None]:
        DyingReplica.calls += 1
        after = self.after if DyingReplica.calls == 1 or self.after else None
        count = 0
        async for item in super().call(*args, **kwargs):
            if after is not None and count == after and item[0] != END:
                if after == 0:
                    raise RuntimeError("the replica's process died")
                return
            count += 1
            yield item

    async def __init__(self, settings: dict[str, Any], after: int) -> None:  # type: ignore[misc]
        await super().__init__(settings)
        self.after = after


def dying(after: int) -> ReplicaSet:
    from ray import serve

    DyingReplica.calls = 0
    alone = Settings.model_validate(
        {"defaults": False, "store": {"url": "none"}, "models": [SETTINGS.models[0].model_dump()]}
    )
    app = serve.deployment(DyingReplica).bind(alone.model_dump(mode="json"), after)
    return ReplicaSet(
        "reverse", serve.run(app, name=f"dying-{after}", route_prefix=None, _local_testing_mode=True)
    )


@pytest.mark.anyio
async def test_a_stream_cut_by_a_dead_replica_is_an_error_not_an_answer() -> None:
    replicas = dying(after=3)
    body = {"model": "reverse", "messages": [{"role": "user", "content": "a b c d e"}], "stream": True}
    reply = await replicas.send("/chat/completions", body, None)
    received: list[Any] = []

    async def read() -> None:
        async for event in reply.answer.items:
            received.append(event)

    with pytest.raises(modelport.errors.UpstreamError, match="ended its answer before it was complete"):
        await read()
    assert len(received) == 2  # the role and one word arrived, then the replica was gone


@pytest.mark.anyio
async def test_a_request_no_replica_began_is_sent_again() -> None:
    replicas = dying(after=0)
    body = {"model": "reverse", "messages": [{"role": "user", "content": "x y"}]}
    reply = await replicas.send("/chat/completions", body, None)
    assert reply.answer["choices"][0]["message"]["content"] == "y x"
    assert DyingReplica.calls == 2
