"""The registry a configuration describes: each model of `Settings` added as what it is — a model one engine
loads, a pool of remote replicas (one model, or every model they list), or a user's `module:function`
predictor. Above the engines, so that the predictor layer never imports them."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from modelport import hub
from modelport.engines import Engine, engine
from modelport.engines.remote import add_remote
from modelport.predictors.contract import Predictor, check_predictor
from modelport.predictors.registry import QUEUE, TIMEOUT, ModelRegistry, ModelSpec
from modelport.settings import Settings


def registry(settings: Settings) -> ModelRegistry:
    """The models `settings` configures, with their aliases."""
    built = ModelRegistry(settings.all_aliases(), settings.openai_name)
    for model in settings.all_models():
        if model.engine == "remote":  # a pool of replicas, maybe of many models: not a one-model engine
            add_remote(
                built,
                model.id,
                model.options,
                concurrency=model.concurrency,
                queue=model.queue,
                timeout=model.timeout,
            )
        elif model.engine is not None:
            assert model.id is not None
            add_engine(
                built,
                model.id,
                model.engine,
                concurrency=model.concurrency,
                queue=model.queue,
                timeout=model.timeout,
                keep_alive=settings.keep_alive_of(model),
                **model.options,
            )
        else:
            assert model.id is not None
            assert model.predictor is not None
            built.add_reference(
                model.id,
                model.predictor,
                capability=model.capability,
                concurrency=model.concurrency or 1,
                queue=model.queue,
                timeout=model.timeout,
            )
    return built


def add_engine(
    registry: ModelRegistry,
    model_id: str,
    name: str,
    *,
    concurrency: int | None = None,
    queue: int = QUEUE,
    timeout: float = TIMEOUT,
    keep_alive: float | None = None,
    **options: Any,
) -> None:
    """Register a model served by an engine; it loads on first use (`hf://` references among its options
    are pulled then) and may be unloaded after `keep_alive` idle seconds."""
    backend = engine(name)
    backend.check_options(options, model_id, name)
    local = functools.cache(lambda: hub.local_options(options))

    def load() -> Sequence[Predictor]:
        made = backend.load(**local())
        predictors = [fn if isinstance(fn, Predictor) else check_predictor(fn) for fn in made]
        registry.check_distinct(model_id, predictors)
        return predictors

    # What `modelport models` shows of it: the engine, and what it reads beside text.
    sees = ", reads images (projector)" if options.get("mmproj") else ""
    spec = ModelSpec(
        model_id,
        load,
        f"engine {name}{sees}",
        concurrency or backend.concurrency(options),
        queue,
        timeout,
        memory=lambda: backend.memory(local()),
        keep_alive=keep_alive,
        info=functools.partial(_described, backend, options, local) if backend.describe else None,
    )
    registry.add(spec)


def _described(backend: Engine, options: dict[str, Any], local: Any) -> dict[str, Any]:
    """What a model's files say it is (`Engine.describe`); nothing while an `hf://` reference among its
    options is not pulled yet (`local`, cached, is where pulling happens: describing must not download)."""
    assert backend.describe is not None
    pulled = local.cache_info().currsize > 0 or not any(hub.is_reference(v) for v in options.values())
    return backend.describe(**local()) if pulled else {}
