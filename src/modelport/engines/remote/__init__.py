"""Remote models: OpenAI-compatible upstreams (vLLM, llama-server, Ollama, hosted APIs, other modelports)
served as modelport models, on replicas with health checks, routing and failover.

Not an engine of one model like the others: one `engine = "remote"` entry is a pool of replicas serving
one model, or (`discover = true`) every model those replicas list.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from modelport.config_errors import explained
from modelport.engines.remote.discovery import Discovery
from modelport.engines.remote.options import DEFAULT_CAPABILITIES, RemoteOptions
from modelport.engines.remote.pool import ReplicaPool
from modelport.engines.remote.upstream_model import RemoteModel
from modelport.predictors.contract import Capability
from modelport.predictors.registry import ModelRegistry, ModelSpec
from modelport.predictors.relay import Relay

__all__ = ["RemoteOptions", "add_remote"]


def add_remote(
    registry: ModelRegistry,
    model_id: str | None,
    options: dict[str, Any],
    *,
    concurrency: int | None,
    queue: int,
    timeout: float,
) -> None:
    """Add one `engine = "remote"` entry to `registry`: its model, or its catalog of discovered models."""
    try:
        settings = RemoteOptions.model_validate(options)
    except ValidationError as error:
        raise ValueError(explained(error, RemoteOptions, f"model `{model_id}`")) from None
    name = model_id or urlsplit(settings.upstreams[0]).hostname or "remote"
    if not settings.discover and model_id is None:
        raise ValueError("a remote model needs an `id` (or `discover = true`)")
    pool = ReplicaPool(settings, timeout, name)
    registry.add_pool(pool)
    slots = concurrency or settings.max_in_flight * len(pool.replicas)
    where = ", ".join(r.label for r in pool.replicas)

    def spec(
        model: str, upstream_model: str, capabilities: tuple[Capability, ...], owned_by: str
    ) -> ModelSpec:
        remote = RemoteModel(pool, model, upstream_model)
        predictors = [
            Relay(remote.send, f"remote {upstream_model} ({c}) at {where}", c) for c in capabilities
        ]
        return ModelSpec(
            model,
            lambda: predictors,
            f"remote {upstream_model} at {where}",
            slots,
            queue,
            timeout,
            owned_by,
            capabilities,
        )

    if settings.discover:
        registry.add_catalog(Discovery(pool, name, settings, spec))
    else:
        assert model_id is not None
        capabilities = tuple(settings.capabilities or DEFAULT_CAPABILITIES)
        registry.add(spec(model_id, settings.upstream_model or model_id, capabilities, "modelport"))
