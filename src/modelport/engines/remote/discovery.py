"""Discovery: the models a set of upstreams lists at `/models`, served under a prefix, refreshed when the
list is older than `refresh` seconds (or when a request names a model not yet known)."""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import time
from collections.abc import Callable

from modelport.engines.remote.options import DEFAULT_CAPABILITIES, RemoteOptions
from modelport.engines.remote.pool import ReplicaPool
from modelport.errors import ModelportError
from modelport.predictors.contract import Capability
from modelport.predictors.registry import ModelSpec

log = logging.getLogger("modelport.upstreams")
_RETRY = 5.0  # seconds before a failed discovery may be tried again
_NAMES = {capability.value for capability in Capability}
SpecFactory = Callable[[str, str, tuple[Capability, ...], str], ModelSpec]


class Discovery:
    """The discovered models of one `discover = true` entry."""

    def __init__(self, pool: ReplicaPool, name: str, options: RemoteOptions, make_spec: SpecFactory) -> None:
        self.pool = pool
        self.name = name
        self.options = options
        self.prefix = f"{name}/" if options.prefix is None else options.prefix
        self.specs: dict[str, ModelSpec] = {}
        self._make_spec = make_spec
        self._fetched = self._tried = -float("inf")
        self._lock = asyncio.Lock()

    def stale(self, after: float | None = None) -> bool:
        """Whether the list was last fetched more than `after` seconds ago (by default: `refresh` seconds
        ago, or a failed fetch more than a few seconds ago)."""
        now = time.monotonic()
        if after is not None:
            return now - self._tried >= after
        if self._fetched == self._tried:  # the last fetch worked
            return now - self._fetched >= self.options.refresh
        return now - self._tried >= min(_RETRY, self.options.refresh)

    async def refresh(self, after: float | None = None) -> None:
        """Fetch the list again if it is older than `after` seconds; an upstream that fails keeps the
        previous list (and says so in the log)."""
        if not self.stale(after):
            return
        async with self._lock:
            if not self.stale(after):
                return
            self._tried = time.monotonic()
            try:
                listing = await self.pool.get_json("/models", self.name)
                entries = listing["data"]
                if not isinstance(entries, list):
                    raise TypeError("`data` is not a list")
            except (ModelportError, KeyError, TypeError) as error:
                log.warning(
                    "discovering the models of %s failed, keeping %d: %s", self.name, len(self.specs), error
                )
                return
            specs = {}
            for entry in entries:
                if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                    continue
                upstream_id = entry["id"]
                if self.options.allowed_models is not None and not any(
                    fnmatch.fnmatchcase(upstream_id, pattern) for pattern in self.options.allowed_models
                ):
                    continue
                model_id = self.prefix + upstream_id
                owned_by = str(entry.get("owned_by") or self.name)
                specs[model_id] = self._make_spec(model_id, upstream_id, self._capabilities(entry), owned_by)
            if set(specs) != set(self.specs):
                log.info(
                    "%s serves %d discovered models: %s", self.name, len(specs), ", ".join(sorted(specs))
                )
            self.specs = specs
            self._fetched = self._tried

    def _capabilities(self, entry: dict[str, object]) -> tuple[Capability, ...]:
        """Configured, else what the upstream reports (another modelport does), else chat + completions."""
        if self.options.capabilities is not None:
            return tuple(self.options.capabilities)
        reported = entry.get("capabilities")
        if isinstance(reported, list):
            known = tuple(Capability(c) for c in reported if c in _NAMES)
            if known:
                return known
        return DEFAULT_CAPABILITIES
