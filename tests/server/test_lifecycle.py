"""A server stopped in a process that goes on (an application's, a test run's) gives its models back: what
start-up froze out of the collector's passes is collectable again, and nothing process-wide (the metrics'
registry, FastAPI's caches) keeps the stopped service alive."""

from __future__ import annotations

import gc
import weakref

import httpx

from modelport.predictors.registry import ModelRegistry
from modelport.server import create_app
from modelport.service import Service
from tests.predictors.tiny_models import trigram_embed
from tests.support.live import serve_app, wait_healthy


def test_a_stopped_server_leaves_nothing_of_its_service_or_models_alive() -> None:
    registry = ModelRegistry()
    registry.add_predictor("trigram", trigram_embed)
    service = Service(registry)
    with serve_app(create_app(service=service)) as url:
        wait_healthy(url)  # loaded, and start-up's objects frozen
        assert httpx.post(f"{url}/v1/embeddings", json={"model": "trigram", "input": "hi"}).status_code == 200
        assert httpx.get(f"{url}/metrics").status_code == 200
        model = weakref.ref(service.manager.loaded_models()[0])
        alive = weakref.ref(service)
    del service
    gc.collect()
    # Each one held for the life of the process before: a worker of the test suite grew past 15 GB.
    assert model() is None
    assert alive() is None
