"""modelport's own engines on a Ray cluster (`modelport serve --ray`): each configured model becomes a Ray
Serve deployment of `ModelReplica`s, and modelport's HTTP face stays the ingress, relaying each request to
a replica through a deployment handle, so routes, keys, limits, metrics, request ids, errors and streaming
are the ones a plain `modelport serve` has. Ray is imported only here, and only when asked for."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
log = logging.getLogger("modelport.cluster")
Progress = Callable[[str, int, int], None]


def deploy(
    settings: Settings,
    address: str | None = None,
    *,
    local_testing: bool = False,
    progress: Progress | None = None,
) -> ModelRegistry:
    """Deploy every model `settings` configures on Ray (`address`: None starts a local instance, `auto` or
    `ray://…` joins a cluster) and return the ingress's registry of relays to them. Each model's contract
    is checked here first, and on a local instance (which nothing can grow) whether the replicas fit its
    CPUs and GPUs; then every deployment starts at once, `progress` is told of each that is ready, Ray
    Serve's messages (a replica that cannot be scheduled) are logged as they come, and one that is not
    ready within `ray_ready_timeout` stops it all with Ray's reason. `local_testing` runs the deployments
    in this process (Ray Serve's testing mode)."""
    import ray
    from ray import serve

    models = settings.all_models()
    for model in models:  # predictor references are imported and checked now, before anything is deployed
        assemble.registry(_alone(settings, model))
    if not local_testing:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address=address, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
        _DEPLOYED.joined, _DEPLOYED.applications = address is not None, []
        try:
            if address is None:
                _check_fit(models, ray.cluster_resources())  # type: ignore[no-untyped-call]
            serve.start(http_options={"location": "NoServer"})  # the ingress is modelport's own server
        except BaseException:
            shutdown()
            raise
    replica: Any = serve.deployment(ModelReplica)  # typed as the decorator it also is
    handles = {}
    try:
        for model in models:
            assert model.id is not None
            app = replica.options(name=model.id, **_ray_options(model))
            bound = app.bind(_alone(settings, model).model_dump(mode="json"))
            _DEPLOYED.applications.append(model.id)
            try:
                handles[model.id] = (
                    serve.run(bound, name=model.id, route_prefix=None, _local_testing_mode=True)
                    if local_testing
                    else serve._run(bound, name=model.id, route_prefix=None, _blocking=False)
                )
            except Exception as error:  # a predictor that cannot be pickled or imported, a bad file
                raise PredictorContractError(
                    f"model `{model.id}` could not be deployed on Ray: {error}"
                ) from error
        if not local_testing:
            _wait_ready(list(handles), settings.ray_ready_timeout, progress)
    except BaseException:
        if not local_testing:
            shutdown()
        raise
    registry = ModelRegistry(settings.all_aliases(), settings.openai_name)
    for model in models:
        assert model.id is not None
        handle = handles[model.id]
        registry.add(_spec(model, ReplicaSet(model.id, handle), handle.capabilities.remote().result()))
    return registry


def _check_fit(models: list[ModelConfig], offered: dict[str, float]) -> None:
    """Stop at once, naming what each model asks, when the replicas cannot fit the instance."""
    for resource, asked in (("CPU", _cpus), ("GPU", lambda m: m.num_gpus)):
        wants = {m.id: asked(m) * _fewest(m) for m in models}
        needed, have = sum(wants.values()), float(offered.get(resource, 0.0))
        if needed > have + 1e-9:
            shown = ", ".join(f"{model} {amount:g}" for model, amount in wants.items() if amount)
            replicas = sum(_fewest(m) for m in models)
            field = "num_cpus" if resource == "CPU" else "num_gpus"
            raise ValueError(
                f"the models need {needed:g} {resource}s for {replicas} replicas ({shown}), and this Ray "
                f"instance has {have:g}: lower `{field}` in models.toml, serve fewer models, or join a "
                "larger cluster (--ray ADDRESS)"
            )


def _wait_ready(names: list[str], timeout: float, progress: Progress | None) -> None:
    """Until every application runs; Ray Serve's messages logged as they change; a ValueError naming the
    deployments that failed, or are not ready in `timeout` seconds, with Ray's reasons."""
    from ray import serve

    deadline = time.monotonic() + timeout
    ready: set[str] = set()
    said: dict[str, str] = {}
    while True:
        applications = serve.status().applications
        reasons: dict[str, str] = {}
        for name in names:
            found = applications.get(name)
            if found is None:
                continue
            messages = [found.message] + [d.message for d in found.deployments.values()]
            reason = " ".join(m for m in messages if m).strip()
            reasons[name] = reason
            if reason and said.get(name) != reason:
                said[name] = reason
                log.warning("ray: %s: %s", name, reason)
            if str(found.status) in ("DEPLOY_FAILED", "ApplicationStatus.DEPLOY_FAILED"):
                raise ValueError(f"the Ray deployment `{name}` failed: {reason or 'no reason given'}")
            if str(found.status) in ("RUNNING", "ApplicationStatus.RUNNING") and name not in ready:
                ready.add(name)
                if progress is not None:
                    progress(name, len(ready), len(names))
        if len(ready) == len(names):
            return
        if time.monotonic() > deadline:
            waiting = [n for n in names if n not in ready]
            shown = "; ".join(f"`{n}`: {reasons.get(n) or 'no reason given'}" for n in waiting)
            raise ValueError(
                f"{len(waiting)} Ray deployment(s) not ready after {timeout:g} s (ray_ready_timeout): {shown}"
            )
        time.sleep(0.5)


@dataclass
class _Deployed:
    """What this process put on Ray, for `shutdown` to take away."""

    joined: bool = False  # a cluster others may use, rather than an instance of this process's own
    applications: list[str] = field(default_factory=list)


_DEPLOYED = _Deployed()


def shutdown() -> None:
    """Leave Ray. On a cluster this process joined, its own applications are removed and the rest of Ray
    Serve is left as it was; they are removed without waiting, since Ray Serve gives a replica up to 20 s
    to end, one it could never place too. A local instance `deploy` started is stopped whole."""
    import ray
    from ray import serve

    if _DEPLOYED.joined and _DEPLOYED.applications:
        for name in _DEPLOYED.applications:
            serve.delete(name, _blocking=False)
        # A controller runs one caller's calls in order: once it has answered this one, it has taken the
        # deletions too (sent without waiting, they could be lost with the connection).
        serve.status()
    _DEPLOYED.applications = []
    ray.shutdown()


def _spec(model: ModelConfig, replicas: ReplicaSet, found: dict[str, Any]) -> ModelSpec:
    assert model.id is not None
    capabilities = tuple(Capability(c) for c in found["capabilities"])
    name = f"ray deployment `{model.id}`"
    voices = tuple(found.get("voices") or ())
    predictors = [
        Relay(replicas.send, f"{name} ({c})", c, voices if c is Capability.SPEECH else ())
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


def _fewest(model: ModelConfig) -> int:
    """The replicas a model starts with (and never goes below)."""
    return model.autoscaling.min if model.autoscaling else model.replicas


def _cpus(model: ModelConfig) -> float:
    """CPUs a replica reserves: the model's `num_cpus`, else what its engine keeps busy."""
    if model.num_cpus is not None:
        return model.num_cpus
    if model.engine in (None, "remote"):
        return 0.2
    return engine(model.engine).cpus(model.options)


def _ray_options(model: ModelConfig) -> dict[str, Any]:
    # A replica takes what its model decodes together (a GGUF's slots), else enough callers to batch them.
    own = engine(model.engine).concurrency(model.options) if model.engine not in (None, "remote") else 1
    slots = model.concurrency or (own if own > 1 else BATCHED)
    options: dict[str, Any] = {
        "ray_actor_options": {"num_cpus": _cpus(model), "num_gpus": model.num_gpus},
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
