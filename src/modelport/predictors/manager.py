"""Loads models on first use (or at start-up), once, and bounds how many calls each runs at a time."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import anyio

from modelport.errors import ModelNotFoundError, UnsupportedCapabilityError
from modelport.predictors.contract import Capability, Predictor
from modelport.predictors.registry import ModelRegistry, ModelSpec

log = logging.getLogger("modelport.models")


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to serve: its predictors by capability and its concurrency limiter."""

    spec: ModelSpec
    predictors: dict[Capability, Predictor]
    limiter: anyio.CapacityLimiter
    load_seconds: float

    def predictor(self, capability: Capability) -> Predictor:
        """The predictor for `capability`, or a 400 naming what the model can do."""
        try:
            return self.predictors[capability]
        except KeyError:
            can = ", ".join(sorted(self.predictors)) or "nothing"
            raise UnsupportedCapabilityError(
                f"The model `{self.spec.id}` does not support {capability}; it serves: {can}.", param="model"
            ) from None


class ModelManager:
    """Owns loading: each model loads once, in a worker thread, with a progress line in the log."""

    def __init__(self, registry: ModelRegistry) -> None:
        self.registry = registry
        self._loaded: dict[str, LoadedModel] = {}
        self._locks: dict[str, anyio.Lock] = {}

    async def get(self, name: str) -> LoadedModel:
        """The loaded model for an id or alias, loading it now if needed."""
        spec = self.registry.resolve(name)
        loaded = self._loaded.get(spec.id)
        if loaded is not None:
            return loaded
        lock = self._locks.setdefault(spec.id, anyio.Lock())
        async with lock:
            if spec.id not in self._loaded:
                self._loaded[spec.id] = await anyio.to_thread.run_sync(self._load, spec)
        return self._loaded[spec.id]

    async def load_all(self) -> None:
        """Load every registered model (start-up preloading)."""
        for spec in self.registry.specs:
            await self.get(spec.id)

    def loaded(self, model_id: str) -> LoadedModel | None:
        """The model if it is already loaded."""
        return self._loaded.get(model_id)

    def is_known(self, name: str) -> bool:
        """Whether an id or alias names a registered model."""
        try:
            self.registry.resolve(name)
        except ModelNotFoundError:
            return False
        return True

    @staticmethod
    def _load(spec: ModelSpec) -> LoadedModel:
        log.info("loading %s (%s)…", spec.id, spec.source)
        start = time.perf_counter()
        predictors = {p.capability: p for p in spec.load()}
        seconds = time.perf_counter() - start
        log.info("loaded %s in %.2fs: %s", spec.id, seconds, ", ".join(predictors))
        return LoadedModel(spec, predictors, anyio.CapacityLimiter(spec.concurrency), seconds)
