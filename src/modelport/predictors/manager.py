"""Loads models on first use (or at start-up), once; callers wait for a loading model, within a bound.
Unloads a model idle past its `keep_alive`, and the least recently used idle ones when a load needs room
under the memory budget; a model with calls in flight or waiting is never unloaded."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from modelport import metrics
from modelport.errors import (
    ModelLoadingError,
    ModelNotFoundError,
    ModelTooLargeError,
    PredictorContractError,
    PredictorError,
    UnsupportedCapabilityError,
)
from modelport.machine import back_into_collections, give_back_memory, process_rss
from modelport.predictors.contract import Capability, Predictor
from modelport.predictors.registry import ModelRegistry, ModelSpec
from modelport.predictors.relay import Relay
from modelport.predictors.slots import Slots

log = logging.getLogger("modelport.models")
CATALOG_RECHECK = (
    5.0  # seconds: how stale a catalog may be before a request for an unknown model refreshes it
)
REAP_EVERY = 1.0  # seconds between looks for models idle past their keep_alive


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to serve: its predictors by capability and its slots."""

    spec: ModelSpec
    predictors: dict[Capability, Predictor | Relay]
    slots: Slots
    load_seconds: float
    memory: int = 0  # bytes: RSS the load added (the estimate when it added none), 0 if it cannot unload
    state: dict[str, Any] = field(default_factory=dict, compare=False)  # the service's per-model helpers

    def predictor(self, capability: Capability) -> Predictor | Relay:
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
        self,
        registry: ModelRegistry,
        load_wait: float = 600.0,
        background_share: float = 0.25,
        memory_budget: int | None = None,
    ) -> None:
        self.registry = registry
        self.load_wait = load_wait
        self.background_share = background_share
        self.memory_budget = memory_budget
        self._loaded: dict[str, LoadedModel] = {}
        self._loading: dict[str, asyncio.Future[LoadedModel]] = {}
        self._asked: dict[str, float] = {}  # model id → when a request last asked for it
        self._kept: dict[str, float | None] = {}  # model id → a request's own keep_alive (None: forever)
        self._one_load: asyncio.Lock | None = None  # loads run one at a time, so each one's RSS is its own

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
        self._asked[spec.id] = time.monotonic()
        loaded = self._loaded.get(spec.id)
        if loaded is not None:
            return loaded
        try:
            # Shielded: a caller that gives up (or disconnects) must not cancel the load for the others.
            return await asyncio.wait_for(asyncio.shield(self._loading_of(spec)), self.load_wait)
        except TimeoutError:
            raise ModelLoadingError(spec.id, retry_after=5) from None

    async def load_all(self, progress: Callable[[str, int, int], None] | None = None) -> None:
        """Load every registered model (start-up preloading), however long it takes; `progress` is told of
        each (its id, how many are loaded, of how many)."""
        specs = self.registry.specs
        for done, spec in enumerate(specs, 1):
            await self._loading_of(spec)
            if progress is not None:
                progress(spec.id, done, len(specs))

    def _loading_of(self, spec: ModelSpec) -> asyncio.Future[LoadedModel]:
        """The one load of a model, started now if it has not begun (or if it failed: it is retried)."""
        loading = self._loading.get(spec.id)
        if loading is None or (loading.done() and (loading.cancelled() or loading.exception() is not None)):
            loading = self._loading[spec.id] = asyncio.ensure_future(self._load_in_thread(spec))
        return loading

    async def _load_in_thread(self, spec: ModelSpec) -> LoadedModel:
        self._one_load = self._one_load or asyncio.Lock()
        async with self._one_load:
            needs = await anyio.to_thread.run_sync(self._estimate, spec)
            await self._make_room(spec, needs)
            model = await anyio.to_thread.run_sync(self._load, spec, self.background_share, needs)
        self._loaded[spec.id] = model
        self._asked[spec.id] = time.monotonic()
        metrics.LOADS.labels(spec.id).observe(model.load_seconds)
        return model

    async def _make_room(self, spec: ModelSpec, needs: int) -> None:
        """Unload idle models, least recently used first, until `needs` more bytes fit the budget; wait
        for busy ones to finish when unloading the idle ones is not enough."""
        budget = self.memory_budget
        if budget is None or needs == 0:
            return
        if needs > budget:
            raise ModelTooLargeError(spec.id, needs, budget)
        deadline = time.monotonic() + self.load_wait
        while sum(m.memory for m in self._loaded.values()) + needs > budget:
            idle = [m for m in self._loaded.values() if m.memory and m.slots.idle]
            if idle:
                await self.unload(min(idle, key=self.last_used).spec.id, "memory")
            elif time.monotonic() > deadline:
                raise ModelLoadingError(spec.id, retry_after=5)
            else:
                await asyncio.sleep(0.05)

    def last_used(self, model: LoadedModel) -> float:
        """When the model was last asked for, or last finished a call (monotonic seconds)."""
        return max(self._asked.get(model.spec.id, 0.0), model.slots.last_release)

    def keep(self, model_id: str, keep_alive: float | None) -> None:
        """How long a loaded model stays once idle (seconds; None: until unloaded), in place of its
        configuration's, as a request asked (Ollama's `keep_alive`), until it is unloaded."""
        if model_id in self._loaded:
            self._kept[model_id] = keep_alive

    def keep_alive_of(self, model: LoadedModel) -> float | None:
        """How long the model stays once idle (seconds; None: until unloaded): a request's own, else its
        configuration's."""
        return self._kept.get(model.spec.id, model.spec.keep_alive)

    async def unload(self, model_id: str, reason: str) -> bool:
        """Forget a loaded model so its memory is freed once the calls still holding it end; whether it
        was loaded. The next request loads it again."""
        if not self._forget(model_id, reason):
            return False
        await self._collect()
        return True

    async def close(self) -> None:
        """Forget every loaded model, the service being closed: an in-process client or a server stopped
        in a process that goes on (a test, an application) gives their memory back."""
        holds_memory = any(model.memory for model in self._loaded.values())
        for model_id in list(self._loaded):
            self._forget(model_id, "closed")
        if holds_memory:
            await self._collect()
        else:  # functions alone: nothing worth a full collection now (0.2 s and more), but collectable
            back_into_collections()

    def _forget(self, model_id: str, reason: str) -> bool:
        model = self._loaded.pop(model_id, None)
        self._kept.pop(model_id, None)
        if model is None:
            return False
        self._loading.pop(model_id, None)
        metrics.UNLOADS.labels(model_id, reason).inc()
        log.info("unloaded %s (%s; it took ~%.0f MiB)", model_id, reason, model.memory / 2**20)
        return True

    @staticmethod
    async def _collect() -> None:
        # Engines' closures form cycles, and a model loaded at start-up was frozen with it (see the server's
        # start-up): back into the collector's reach, or its memory would never return.
        back_into_collections()
        await anyio.to_thread.run_sync(gc.collect)
        await anyio.to_thread.run_sync(give_back_memory)

    async def reap_idle(self) -> None:
        """Unload models idle past their `keep_alive`, until cancelled."""
        while True:
            await asyncio.sleep(REAP_EVERY)
            now = time.monotonic()
            for model in list(self._loaded.values()):
                keep_alive = self.keep_alive_of(model)
                if keep_alive is not None and model.slots.idle and now - self.last_used(model) >= keep_alive:
                    await self.unload(model.spec.id, "idle")

    def busy(self) -> bool:
        """Whether a model is loading or answering now (read from any thread)."""
        loading = list(self._loading.values())
        return any(not future.done() for future in loading) or any(
            model.slots.active for model in list(self._loaded.values())
        )

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
    def _estimate(spec: ModelSpec) -> int:
        """Bytes the model will take, before it loads (pulling its files first if they are on the Hub)."""
        with _load_failures(spec):
            return spec.memory() if spec.memory is not None else 0

    @staticmethod
    def _load(spec: ModelSpec, background_share: float, estimate: int) -> LoadedModel:
        log.info("loading %s (%s)…", spec.id, spec.source)
        start, rss = time.perf_counter(), process_rss()
        with _load_failures(spec):
            predictors = {p.capability: p for p in spec.load()}
        seconds, grown = time.perf_counter() - start, process_rss() - rss
        log.info(
            "loaded %s in %.2fs (+%.0f MiB RSS, estimated %.0f): %s",
            spec.id,
            seconds,
            grown / 2**20,
            estimate / 2**20,
            ", ".join(predictors),
        )
        slots = Slots(spec.id, spec.concurrency, spec.queue, background_share)
        memory = (grown if grown > 0 else estimate) if spec.memory is not None else 0
        return LoadedModel(spec, predictors, slots, seconds, memory)


@contextmanager
def _load_failures(spec: ModelSpec) -> Iterator[None]:
    """A model that cannot load (a bad file, a template llama.cpp refuses, a missing package, a pull that
    failed) is a 500 naming it; a predictor that breaks its contract says so itself."""
    try:
        yield
    except PredictorContractError:
        raise
    except Exception as error:
        log.exception("loading %s failed", spec.id)
        raise PredictorError(
            f"The model `{spec.id}` failed to load: {type(error).__name__}: {error}"
        ) from error
