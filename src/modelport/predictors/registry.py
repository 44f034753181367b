"""Which models exist: their ids, how each is loaded, and the aliases that point at them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from modelport.errors import ModelNotFoundError, PredictorContractError
from modelport.predictors.contract import Capability, Predictor, check_predictor

Loader = Callable[[], Sequence[Predictor]]


# A model's defaults: calls that may wait for a slot (past it, 429), and seconds a call or a stream's
# next item may take (past it, 504).
QUEUE = 64
TIMEOUT = 600.0


@dataclass(frozen=True)
class ModelSpec:
    """A model that can be loaded: its id, a loader returning its checked predictors, and its limits."""

    id: str
    load: Loader
    source: str
    concurrency: int = 1
    queue: int = QUEUE
    timeout: float = TIMEOUT
    owned_by: str = "modelport"


class ModelRegistry:
    """Model ids → how to load them, plus aliases. Predictors are checked when they are added."""

    def __init__(self, aliases: dict[str, str] | None = None) -> None:
        self._specs: dict[str, ModelSpec] = {}
        self._aliases: dict[str, str] = dict(aliases or {})

    def add_predictor(
        self,
        model_id: str,
        *fns: Callable[..., Any],
        capability: Capability | str | None = None,
        concurrency: int = 1,
        queue: int = QUEUE,
        timeout: float = TIMEOUT,
    ) -> list[Predictor]:
        """Register plain functions as the model `model_id`; one per capability. Checked now."""
        predictors = [check_predictor(fn, capability) for fn in fns]
        self._add_checked(model_id, predictors)
        source = ", ".join(p.name for p in predictors)
        self.add(ModelSpec(model_id, lambda: predictors, source, concurrency, queue, timeout))
        return predictors

    def add_engine(
        self,
        model_id: str,
        engine: str,
        *,
        concurrency: int | None = None,
        queue: int = QUEUE,
        timeout: float = TIMEOUT,
        **options: Any,
    ) -> None:
        """Register a model served by a built-in or plug-in engine; it loads on first use."""
        from modelport.engines import engine_factory
        from modelport.engines.llamacpp import SLOTS

        factory = engine_factory(engine)
        default_concurrency = int(options.get("n_parallel", SLOTS)) if engine == "llamacpp" else 1

        def load() -> Sequence[Predictor]:
            made = factory(**options)
            predictors = [fn if isinstance(fn, Predictor) else check_predictor(fn) for fn in made]
            self._add_checked(model_id, predictors)
            return predictors

        concurrency = concurrency or default_concurrency
        self.add(ModelSpec(model_id, load, f"engine {engine}", concurrency, queue, timeout))

    def add_reference(self, model_id: str, reference: str, **kwargs: Any) -> list[Predictor]:
        """Register the predictor named by `module:function`."""
        module_name, _, attr = reference.partition(":")
        if not module_name or not attr:
            raise PredictorContractError(
                f"model `{model_id}`: predictor `{reference}` is not `module:function`"
            )
        try:
            fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as error:
            raise PredictorContractError(
                f"model `{model_id}`: cannot import `{reference}`: {error}"
            ) from error
        if not callable(fn):
            raise PredictorContractError(f"model `{model_id}`: `{reference}` is not a function")
        try:
            return self.add_predictor(model_id, fn, **kwargs)
        except PredictorContractError as error:
            raise PredictorContractError(f"model `{model_id}` (`{reference}`): {error}") from error

    def add(self, spec: ModelSpec) -> None:
        """Register a model spec; its id must be new."""
        if spec.id in self._specs:
            raise ValueError(f"model `{spec.id}` is registered twice")
        self._specs[spec.id] = spec

    def alias(self, name: str, model_id: str) -> None:
        """Let requests for `name` reach `model_id`."""
        self._aliases[name] = model_id

    def resolve(self, name: str) -> ModelSpec:
        """The spec for a model id or alias; 404 if neither."""
        spec = self._specs.get(name) or self._specs.get(self._aliases.get(name, ""))
        if spec is None:
            raise ModelNotFoundError(name)
        return spec

    @property
    def specs(self) -> list[ModelSpec]:
        """Every registered model, in registration order."""
        return list(self._specs.values())

    @property
    def aliases(self) -> dict[str, str]:
        """Alias → model id."""
        return dict(self._aliases)

    @staticmethod
    def _add_checked(model_id: str, predictors: Sequence[Predictor]) -> None:
        seen = [p.capability for p in predictors]
        if len(set(seen)) != len(seen):
            raise PredictorContractError(f"model `{model_id}`: two predictors serve the same capability")

    @classmethod
    def from_settings(cls, settings: Any) -> ModelRegistry:
        """Build the registry a `Settings` describes."""
        registry = cls(settings.all_aliases())
        for model in settings.all_models():
            if model.engine is not None:
                registry.add_engine(
                    model.id,
                    model.engine,
                    concurrency=model.concurrency,
                    queue=model.queue,
                    timeout=model.timeout,
                    **model.options,
                )
            else:
                registry.add_reference(
                    model.id,
                    model.predictor,
                    capability=model.capability,
                    concurrency=model.concurrency or 1,
                    queue=model.queue,
                    timeout=model.timeout,
                )
        return registry
