"""modelport's own engines on a Ray cluster (`modelport serve --ray`): each configured model becomes a Ray
Serve deployment of `ModelReplica`s, and modelport's HTTP face stays the ingress, relaying each request to
a replica through a deployment handle, so routes, keys, limits, metrics, request ids, errors and streaming
are the ones a plain `modelport serve` has. Ray is imported only here, and only when asked for."""

from __future__ import annotations

import functools
import os
from typing import Any

from modelport.cluster.ingress import ReplicaSet
from modelport.cluster.replica import ModelReplica
from modelport.engines import assemble, engine
from modelport.errors import PredictorContractError
from modelport.predictors.contract import Capability
from modelport.predictors.registry import ModelRegistry, ModelSpec
from modelport.predictors.relay import Relay
from modelport.settings import ModelConfig, Settings

__all__ = ["deploy", "shutdown"]
BATCHED = 16  # requests a replica of a model other than a GGUF takes at once (embedding callers batch)


def deploy(settings: Settings, address: str | None = None, *, local_testing: bool = False) -> ModelRegistry:
    """Deploy every model `settings` configures on Ray (`address`: None starts a local instance, `auto` or
    `ray://…` joins a cluster) and return the ingress's registry of relays to them. Each model's contract
    is checked here first; `local_testing` runs the deployments in this process (Ray Serve's testing mode)."""
    import ray
    from ray import serve

    models = settings.all_models()
    for model in models:  # predictor references are imported and checked now, before anything is deployed
        assemble.registry(_alone(settings, model))
    if not local_testing:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address=address, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
        serve.start(http_options={"location": "NoServer"})  # the ingress is modelport's own server
    registry = ModelRegistry(settings.all_aliases())
    replica: Any = serve.deployment(ModelReplica)  # typed as the decorator it also is
    for model in models:
        assert model.id is not None
        app = replica.options(name=model.id, **_ray_options(model))
        try:
            handle = serve.run(
                app.bind(_alone(settings, model).model_dump(mode="json")),
                name=model.id,
                route_prefix=None,
                _local_testing_mode=local_testing,
            )
        except Exception as error:  # a predictor that cannot be pickled or imported on a worker, a bad file
            raise PredictorContractError(
                f"model `{model.id}` could not be deployed on Ray: {error}"
            ) from error
        registry.add(_spec(model, ReplicaSet(model.id, handle), handle.capabilities.remote().result()))
    return registry


def shutdown() -> None:
    """Remove the deployments and leave Ray (stopping the local instance `deploy` started, if it did)."""
    import ray
    from ray import serve

    serve.shutdown()  # type: ignore[no-untyped-call]
    ray.shutdown()


def _spec(model: ModelConfig, replicas: ReplicaSet, found: dict[str, Any]) -> ModelSpec:
    assert model.id is not None
    capabilities = tuple(Capability(c) for c in found["capabilities"])
    name = f"ray deployment `{model.id}`"
    voices = tuple(found.get("voices") or ())
    predictors = [
        Relay(
            functools.partial(replicas.send, c), f"{name} ({c})", c, voices if c is Capability.SPEECH else ()
        )
        for c in capabilities
    ]
    # The ingress lets as many calls through as the replicas take together; each replica queues its own.
    ongoing = _ray_options(model)["max_ongoing_requests"]
    count = model.autoscaling.max if model.autoscaling else model.replicas
    return ModelSpec(
        model.id,
        lambda: predictors,
        name,
        ongoing * count,
        model.queue,
        model.timeout,
        capabilities=capabilities,
    )


def _alone(settings: Settings, model: ModelConfig) -> Settings:
    """The settings a replica runs: this model only, loaded at once, kept for ever, storing nothing."""
    alone = model.model_copy(update={"keep_alive": "forever"})
    return Settings(
        defaults=False,
        models=[alone],
        openai_aliases=False,
        preload=True,
        limits=settings.limits,
        store={"url": "none"},  # type: ignore[arg-type]
        ui=False,
    )


def _ray_options(model: ModelConfig) -> dict[str, Any]:
    # A replica takes what its model decodes together (a GGUF's slots), else enough callers to batch them.
    own = engine(model.engine).concurrency(model.options) if model.engine not in (None, "remote") else 1
    slots = model.concurrency or (own if own > 1 else BATCHED)
    options: dict[str, Any] = {
        "ray_actor_options": {"num_cpus": model.num_cpus, "num_gpus": model.num_gpus},
        "max_ongoing_requests": model.max_ongoing_requests or slots,
    }
    if model.autoscaling is not None:
        options["autoscaling_config"] = {
            "min_replicas": model.autoscaling.min,
            "max_replicas": model.autoscaling.max,
            "target_ongoing_requests": model.autoscaling.target_ongoing_requests,
        }
    else:
        options["num_replicas"] = model.replicas
    return options
