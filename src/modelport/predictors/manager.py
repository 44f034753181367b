"""Loads models on first use (or at start-up), once; callers wait for a loading model, within a bound."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio

from modelport.errors import (
    ModelLoadingError,
    ModelNotFoundError,
    PredictorContractError,
    PredictorError,
    UnsupportedCapabilityError,
)
from modelport.predictors.contract import Capability, Predictor
from modelport.predictors.registry import ModelRegistry, ModelSpec
from modelport.predictors.slots import Slots

log = logging.getLogger("modelport.models")
CATALOG_RECHECK = (
    5.0  # seconds: how stale a catalog may be before a request for an unknown model refreshes it
)


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to serve: its predictors by capability and its slots."""

    spec: ModelSpec
    predictors: dict[Capability, Predictor]
    slots: Slots
    load_seconds: float
    state: dict[str, Any] = field(default_factory=dict, compare=False)  # the service's per-model helpers

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

    def __init__(
        self, registry: ModelRegistry, load_wait: float = 600.0, background_share: float = 0.25
    ) -> None:
        self.registry = registry
        self.load_wait = load_wait
        self.background_share = background_share
        self._loaded: dict[str, LoadedModel] = {}
        self._loading: dict[str, asyncio.Future[LoadedModel]] = {}

    async def get(self, name: str) -> LoadedModel:
        """The loaded model for an id or alias, loading it now if needed; a 503 with `Retry-After` if it
        is still loading after `load_wait` seconds."""
        try:
            spec = self.registry.resolve(name)
        except ModelNotFoundError:
            # Perhaps an upstream lists it since the catalogs were last read (at most every few seconds,
            # so requests for unknown names cannot flood the upstreams).
            if not await self.registry.refresh_catalogs(after=CATALOG_RECHECK):
                raise
            spec = self.registry.resolve(name)
        loaded = self._loaded.get(spec.id)
        if loaded is not None:
            return loaded
        try:
            # Shielded: a caller that gives up (or disconnects) must not cancel the load for the others.
            return await asyncio.wait_for(asyncio.shield(self._loading_of(spec)), self.load_wait)
        except TimeoutError:
            raise ModelLoadingError(spec.id, retry_after=5) from None

    async def load_all(self) -> None:
        """Load every registered model (start-up preloading), however long it takes."""
        for spec in self.registry.specs:
            await self._loading_of(spec)

    def _loading_of(self, spec: ModelSpec) -> asyncio.Future[LoadedModel]:
        """The one load of a model, started now if it has not begun (or if it failed: it is retried)."""
        loading = self._loading.get(spec.id)
        if loading is None or (loading.done() and (loading.cancelled() or loading.exception() is not None)):
            loading = self._loading[spec.id] = asyncio.ensure_future(self._load_in_thread(spec))
        return loading

    async def _load_in_thread(self, spec: ModelSpec) -> LoadedModel:
        model = await anyio.to_thread.run_sync(self._load, spec, self.background_share)
        self._loaded[spec.id] = model
        return model

    def loaded_models(self) -> list[LoadedModel]:
        """The models loaded so far."""
        return list(self._loaded.values())

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
    def _load(spec: ModelSpec, background_share: float) -> LoadedModel:
        log.info("loading %s (%s)…", spec.id, spec.source)
        start = time.perf_counter()
        try:
            predictors = {p.capability: p for p in spec.load()}
        except PredictorContractError:
            raise
        except Exception as error:  # a bad file, a template llama.cpp refuses, a missing package
            log.exception("loading %s failed", spec.id)
            raise PredictorError(
                f"The model `{spec.id}` failed to load: {type(error).__name__}: {error}"
            ) from error
        seconds = time.perf_counter() - start
        log.info("loaded %s in %.2fs: %s", spec.id, seconds, ", ".join(predictors))
        slots = Slots(spec.id, spec.concurrency, spec.queue, background_share)
        return LoadedModel(spec, predictors, slots, seconds)
