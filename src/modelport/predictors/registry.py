"""Which models exist: their ids, how each is loaded, and the aliases that point at them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from modelport.errors import ModelNotFoundError, PredictorContractError
from modelport.predictors.contract import Capability, Predictor, check_predictor
from modelport.predictors.relay import Relay

Loader = Callable[[], Sequence[Predictor | Relay]]


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
    capabilities: tuple[Capability, ...] | None = None  # when known before loading (remote models)
    # Models an engine loads can be unloaded (idle past `keep_alive` seconds, None: never; or for room
    # under the memory budget): `memory` estimates their bytes before they load.
    memory: Callable[[], int] | None = None
    keep_alive: float | None = None
    info: Callable[[], dict[str, Any]] | None = None  # what its files say it is (`Engine.describe`)


class Catalog(Protocol):
    """Models found at run time (an upstream's list): their specs now, and a refresh of them."""

    specs: dict[str, ModelSpec]

    def stale(self, after: float | None = None) -> bool:
        """Whether the list is older than `after` seconds (default: its own refresh interval)."""
        ...

    async def refresh(self, after: float | None = None) -> None:
        """Fetch the list again if it is older than `after` seconds."""
        ...


class Pool(Protocol):
    """Upstream replicas that models of this registry are served by: probed while the service runs."""

    name: str  # the models.toml entry

    @property
    def replicas(self) -> Sequence[Any]:
        """Each replica: `label`, `up`, `in_flight` and `state()` for /health."""
        ...

    async def check(self) -> None:
        """Probe every replica now."""
        ...

    def start(self) -> None:
        """Begin probing, in the running event loop."""
        ...

    async def close(self) -> None:
        """Stop probing and close connections."""
        ...


class ModelRegistry:
    """Model ids → how to load them, plus aliases. Predictors are checked when they are added."""

    def __init__(
        self, aliases: dict[str, str] | None = None, named: Callable[[str], str | None] | None = None
    ) -> None:
        self._specs: dict[str, ModelSpec] = {}
        self._aliases: dict[str, str] = dict(aliases or {})
        self._named = named  # names reached by rule, after ids and aliases (OpenAI's model families)
        self.catalogs: list[Catalog] = []
        self.pools: list[Pool] = []

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
        self.check_distinct(model_id, predictors)
        source = ", ".join(p.name for p in predictors)
        self.add(ModelSpec(model_id, lambda: predictors, source, concurrency, queue, timeout))
        return predictors

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

    def add_catalog(self, catalog: Catalog) -> None:
        """Serve the models a catalog finds, beside the registered ones (which win on a clash)."""
        self.catalogs.append(catalog)

    def add_pool(self, pool: Pool) -> None:
        """Keep track of upstream replicas, for start-up, health and metrics."""
        self.pools.append(pool)

    async def refresh_catalogs(self, after: float | None = None) -> bool:
        """Refresh the catalogs older than `after` seconds; whether any was."""
        stale = [c for c in self.catalogs if c.stale(after)]
        for catalog in stale:
            await catalog.refresh(after)
        return bool(stale)

    def alias(self, name: str, model_id: str) -> None:
        """Let requests for `name` reach `model_id`."""
        self._aliases[name] = model_id

    def by_rule(self, name: str) -> bool:
        """Whether `name` is neither a model's id nor an alias (a name a rule may reach: OpenAI's)."""
        return self._find(name) is None and self._find(self._aliases.get(name, "")) is None

    def resolve(self, name: str) -> ModelSpec:
        """The spec for a model id or alias, or a name reached by rule; 404 if none."""
        for candidate in (name, self._aliases.get(name, "")):
            spec = self._find(candidate)
            if spec is not None:
                return spec
        ruled = self._named(name) if self._named is not None else None  # only once ids and aliases missed
        spec = self._find(ruled) if ruled else None
        if spec is None:
            raise ModelNotFoundError(name)
        return spec

    def _find(self, model_id: str) -> ModelSpec | None:
        spec = self._specs.get(model_id)
        for catalog in self.catalogs:
            spec = spec or catalog.specs.get(model_id)
        return spec

    @property
    def specs(self) -> list[ModelSpec]:
        """Every model: the registered ones in registration order, then those the catalogs found."""
        found = {spec.id: spec for catalog in self.catalogs for spec in catalog.specs.values()}
        return [*self._specs.values(), *(spec for id_, spec in found.items() if id_ not in self._specs)]

    @property
    def aliases(self) -> dict[str, str]:
        """Alias → model id."""
        return dict(self._aliases)

    @staticmethod
    def check_distinct(model_id: str, predictors: Sequence[Predictor | Relay]) -> None:
        """A model serves each capability with one predictor at most."""
        seen = [p.capability for p in predictors]
        if len(set(seen)) != len(seen):
            raise PredictorContractError(f"model `{model_id}`: two predictors serve the same capability")
