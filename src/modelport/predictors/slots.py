"""A model's slots: how many calls run at once, and how many may wait for one before callers are told to
come back later (429 with `Retry-After`) instead of piling up. Background work (batches) takes a slot only
within its share of them and when no interactive call waits: it never stands in front of one."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from modelport import context
from modelport.errors import OverloadedError


class Slots:
    """`total` calls at a time, at most `queue` waiting; `Retry-After` from the recent time a call takes."""

    def __init__(self, model_id: str, total: int, queue: int, background_share: float = 0.25) -> None:
        self.model_id = model_id
        self.total = total
        self.queue = queue
        self.waiting = 0
        self._limiter = anyio.CapacityLimiter(total)
        self._mean_hold = 1.0  # seconds, an exponential moving average
        # Slots background work leaves free for interactive calls (none when there is only one).
        self.reserve = min(total - 1, max(1, round(total * (1 - background_share)))) if total > 1 else 0
        self._released = asyncio.Event()
        self.last_release = time.monotonic()

    @property
    def idle(self) -> bool:
        """No call holds a slot or waits for one."""
        return self.active == 0 and self.waiting == 0

    @property
    def active(self) -> int:
        """Calls holding a slot now."""
        return int(self._limiter.borrowed_tokens)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Hold one slot, waiting in line if all are taken, or raise `OverloadedError` if the line is full.

        Borrowed on behalf of a token, not the current task: a stream may be advanced by different tasks
        (the blocking client runs each step as its own task), and the slot must follow the stream.
        """
        token = object()
        asked = context.current()
        if asked.background:
            while self._limiter.available_tokens <= self.reserve or self.waiting or _gone(asked):
                await self._freed(asked.withdrawn)
            self._limiter.acquire_on_behalf_of_nowait(token)
        elif self._limiter.available_tokens < 1 or self.waiting:
            if self.waiting >= self.queue:
                raise OverloadedError(self.model_id, self.retry_after())
            self.waiting += 1
            try:
                await self._limiter.acquire_on_behalf_of(token)
            finally:
                self.waiting -= 1
        else:
            self._limiter.acquire_on_behalf_of_nowait(token)
        start = time.monotonic()
        try:
            yield
        finally:
            self._limiter.release_on_behalf_of(token)
            self.last_release = time.monotonic()
            self._mean_hold = 0.8 * self._mean_hold + 0.2 * (time.monotonic() - start)
            self._released.set()
            self._released = asyncio.Event()

    async def _freed(self, withdrawn: asyncio.Event | None) -> None:
        """Until a slot is released; `WorkWithdrawn` once `withdrawn` is set (the work is not wanted)."""
        if withdrawn is None:
            await self._released.wait()
            return
        if withdrawn.is_set():
            raise context.WorkWithdrawn
        waits = {asyncio.ensure_future(self._released.wait()), asyncio.ensure_future(withdrawn.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        if withdrawn.is_set():
            raise context.WorkWithdrawn

    def retry_after(self) -> int:
        """Seconds until the line has likely moved up by its length: whole seconds, at least one."""
        return max(1, math.ceil(self._mean_hold * (self.waiting + 1) / self.total))


def _gone(asked: context.RequestContext) -> bool:
    """Whether background work is no longer wanted (it then takes no slot, even a free one)."""
    return asked.withdrawn is not None and asked.withdrawn.is_set()
