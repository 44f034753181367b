"""What every request asks of the store (is this key live, must callers have one, what may this project
use), read ahead of need so that a request waits for the store only when nothing fresh is known.

Each value lives `ttl` seconds. Once past half of that, the request that finds it still gets it at once,
and starts a read beside itself (one per key at a time), so under steady traffic no request waits for the
store, however busy its connection is; a value past its whole life is waited for (by every request that
wants it, sharing one read). A change made elsewhere is therefore seen within `ttl`, as before: on a
2-core machine serving models, each read that requests had waited for took 0.25-1 s (the store's threads
wait for the CPU), which was the whole tail of the cheapest requests (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ReadAhead(Generic[K, V]):
    """Values by key from `read`, each trusted for `ttl()` seconds and read again from half of that; at
    most `cap` keys are kept (past that, all are dropped: a flood of distinct keys costs reads, not
    memory)."""

    def __init__(self, read: Callable[[K], Awaitable[V]], ttl: Callable[[], float], cap: int) -> None:
        self._read = read
        self._ttl = ttl
        self._cap = cap
        self._known: dict[K, tuple[V, float]] = {}
        self._reading: dict[K, asyncio.Task[V]] = {}
        self._generation = 0  # bumped by forget(), so a read begun before it lands nowhere

    async def get(self, key: K) -> V:
        """The value for `key`: the one known if it is fresh enough, else the one read now."""
        known = self._known.get(key)
        if known is not None:
            age, ttl = time.monotonic() - known[1], self._ttl()
            if age <= ttl:
                if age > ttl / 2:
                    self._start(key)
                return known[0]
        # Shielded: a request that is cancelled (its client left) leaves the read to the others.
        return await asyncio.shield(self._start(key))

    def known(self, key: K) -> V | None:
        """The value last read for `key`, however old (None if none was)."""
        known = self._known.get(key)
        return known[0] if known is not None else None

    def forget(self) -> None:
        """Drop every value (after a change made here, so that it is seen at once on this replica)."""
        self._known.clear()
        self._reading.clear()  # a read begun before the change is joined by nobody after it
        self._generation += 1

    def _start(self, key: K) -> asyncio.Task[V]:
        reading = self._reading.get(key)
        if reading is None:
            reading = asyncio.get_running_loop().create_task(self._fetch(key, self._generation))
            self._reading[key] = reading
            reading.add_done_callback(self._finished(key))
        return reading

    async def _fetch(self, key: K, generation: int) -> V:
        began = time.monotonic()  # the value is as old as the moment the read began
        value = await self._read(key)
        if generation == self._generation:
            if len(self._known) >= self._cap and key not in self._known:
                self._known.clear()
            self._known[key] = (value, began)
        return value

    def _finished(self, key: K) -> Callable[[asyncio.Task[V]], None]:
        def finished(task: asyncio.Task[V]) -> None:
            if self._reading.get(key) is task:
                del self._reading[key]
            # A read begun beside a request may fail with nobody waiting for it: the value known stays
            # until its time is up, and then the request that needs it waits for a read and sees the error.
            with contextlib.suppress(asyncio.CancelledError):
                if task.exception() is not None:
                    log.debug("store read ahead failed: %s", task.exception())

        return finished
