"""uvicorn's server, woken once a second rather than ten times.

uvicorn's main loop sleeps 0.1 s between looks at whether it should stop (and, every tenth look, renews its
`Date` header): ten of an idle server's eighteen wake-ups a second, and, while llama.cpp decodes on every
core, each such wake-up takes the serving thread onto a core whose caches llama.cpp's threads have just
filled (docs/benchmarks.md). Here the loop looks once a second, when the `Date` header's second turns, and a
request to stop wakes it at once: a signal, or `stop()` from any thread (the tests' servers stopped in 0.1 s
at best; now as soon as their connections close)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import FrameType

import uvicorn

# uvicorn's `on_tick` renews the Date header when its counter is a multiple of this (its ticks a second).
_TICKS_A_SECOND = 10
_COUNTER_WRAP = 864000  # uvicorn's own
# Seconds past the turn of the second the loop looks: a timer may fire a millisecond early, and a look just
# before the turn would renew the header with the second ending, then look again at once.
_PAST_THE_SECOND = 0.005


class QuietServer(uvicorn.Server):
    """`uvicorn.Server` whose main loop waits for a stop or the next whole second, not for 0.1 s at a time."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._woken: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    async def main_loop(self) -> None:
        asked = asyncio.Event()
        self._woken = (asyncio.get_running_loop(), asked)
        counter = 0
        # A stop asked before `_woken` was set is seen by the first look.
        while not await self.on_tick(counter):
            counter = (counter + _TICKS_A_SECOND) % _COUNTER_WRAP
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asked.wait(), 1.0 - time.time() % 1.0 + _PAST_THE_SECOND)
            asked.clear()  # what woke it is looked at now; a later wake-up sets it again

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._wake()

    def stop(self) -> None:
        """Ask the server to stop (from any thread): it closes its listeners, lets its connections finish
        within the graceful timeout, and ends its lifespan."""
        self.should_exit = True
        self._wake()

    def _wake(self) -> None:
        if self._woken is not None:
            loop, asked = self._woken
            with contextlib.suppress(RuntimeError):  # its loop has closed: nothing left to wake
                loop.call_soon_threadsafe(asked.set)
