"""The watchdog: every predictor call in flight says where it is (waiting for a slot of its model, waiting
for the predictor to start, waiting for its next item), and a call that has made no progress for
`STALLED` seconds is logged with what it waits on — once, then again each `STALLED` seconds it stays so. A
tail latency with no ceiling shows up in the log while it happens, not only in a benchmark's maximum."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from modelport import context
from modelport.predictors.manager import LoadedModel

log = logging.getLogger("modelport.watchdog")
STALLED = 30.0  # seconds without progress after which a call is logged
_LOOK = 5.0  # seconds between looks


@dataclass
class Progress:
    """Where one predictor call is; `since` is when it last moved."""

    model: LoadedModel
    predictor: str
    request_id: str | None
    waits_on: str = "a slot of its model"
    items: int = 0
    since: float = field(default_factory=time.monotonic)
    started: float = field(default_factory=time.monotonic)
    told: float = 0.0  # when it was last logged as stalled

    def now(self, waits_on: str) -> None:
        self.waits_on, self.since = waits_on, time.monotonic()

    def item(self) -> None:
        self.items += 1
        self.since = time.monotonic()
        if self.items == 1:
            self.waits_on = "the predictor's next item"


_calls: dict[int, Progress] = {}
_numbers = itertools.count()


@contextlib.contextmanager
def watched(model: LoadedModel, predictor: str) -> Iterator[Progress]:
    """A call's progress, watched while the block runs."""
    number = next(_numbers)
    progress = Progress(model, predictor, context.current().request_id)
    _calls[number] = progress
    try:
        yield progress
    finally:
        del _calls[number]


def stalled(now: float | None = None) -> list[Progress]:
    """The calls with no progress for `STALLED` seconds."""
    now = time.monotonic() if now is None else now
    return [p for p in list(_calls.values()) if now - p.since >= STALLED]


def report(now: float | None = None) -> int:
    """Log each stalled call not logged within `STALLED` seconds; how many were logged."""
    now = time.monotonic() if now is None else now
    told = 0
    for progress in stalled(now):
        if now - progress.told < STALLED:
            continue
        progress.told = now
        slots = progress.model.slots
        log.warning(
            "request %s: %s (model %s) has waited %.0f s on %s (%d items so far, %.0f s in all; the model's "
            "slots: %d of %d in use, %d waiting)",
            progress.request_id or "-", progress.predictor, progress.model.spec.id, now - progress.since,
            progress.waits_on, progress.items, now - progress.started, slots.active, slots.total,
            slots.waiting,
        )  # fmt: skip
        told += 1
    return told


async def watch() -> None:
    """Look for stalled calls, for as long as the service runs."""
    while True:
        await asyncio.sleep(_LOOK)
        report()
