"""Background responses: each runs as a task of the server that took it, on after its client leaves.

Its events are kept in memory for followers on this server and written to the store in small batches, so a
follower on any replica can replay them (`GET /v1/responses/{id}?stream=true&starting_after=N`). A cancel
marks the stored row, which the job reads at its next write (from any replica) or, here, cancels the task at
once. A job shows it is alive by a heartbeat; one that stopped beating (its server stopped) is marked
`failed` when next looked at, and at start-up: background responses are not resumed after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import anyio

from modelport.store import Store
from modelport.store.response_rows import UNFINISHED

log = logging.getLogger("modelport.responses")
FLUSH = 0.25  # seconds between writes of a job's events
HEARTBEAT = 3  # seconds between signs of life when a job has nothing to write (at most)
_POLL = 0.2  # seconds between looks at the store, following a job of another replica
_TERMINAL = ("response.completed", "response.failed", "response.incomplete")
_GONE_MESSAGE = "The server running this background response stopped before it finished."


@dataclass
class _Job:
    """A job running here: its events so far, and who waits for more."""

    task: asyncio.Task[None] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    written: int = 0
    done: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self.changed.set()
        self.changed = asyncio.Event()

    def stop(self) -> None:
        """Cancel the task, once: the cancelled turn then stores what it made in a shielded step, and a
        second `Task.cancel` (a cancel asked again, or the writer reading the first) would pass through
        anyio's shield and lose it (it did under load: a cancelled response kept no output)."""
        if self.task is not None and not self.task.done() and not self.task.cancelling():
            self.task.cancel()


class Jobs:
    """The background responses of one service."""

    def __init__(self, store: Store, timeout: float) -> None:
        self.store = store
        self.timeout = timeout  # seconds without a sign of life after which a job is taken for dead
        self.heartbeat = min(HEARTBEAT, timeout / 5)
        self._jobs: dict[str, _Job] = {}

    async def start(self, row: dict[str, Any], events: AsyncGenerator[dict[str, Any], None]) -> None:
        """Store the queued response and run its job (`follow` its events)."""
        await self.store.responses.save(row)
        job = self._jobs[row["id"]] = _Job()
        # Not a child of the request's task: a client that leaves must not stop the job.
        job.task = asyncio.get_running_loop().create_task(self._work(row, events, job))

    async def cancel(self, response_id: str, response: dict[str, Any]) -> None:
        """Mark the response cancelled, for good, and stop its job (here at once, or on whichever replica
        runs it at its next write); what it made so far is kept."""
        await self.store.responses.cancel(response_id, {**response, "status": "cancelled"})
        job = self._jobs.get(response_id)
        if job is not None and job.task is not None:
            job.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await job.task

    async def follow(self, response_id: str, after: int) -> AsyncGenerator[dict[str, Any], None]:
        """The job's events after sequence number `after`, as they come, until it ends."""
        job = self._jobs.get(response_id)
        if job is not None:
            while True:
                changed = job.changed
                for event in job.events[after + 1 :]:
                    after = event["sequence_number"]
                    yield event
                if job.done:
                    return
                await changed.wait()
        while True:  # a job of another replica, or one that ended: from the store
            for event in await self.store.responses.events(response_id, after):
                after = event["sequence_number"]
                yield event
                if event["type"] in _TERMINAL:
                    return
            row = await self.store.responses.get(response_id, None)
            if row is None or row["status"] not in UNFINISHED:
                for event in await self.store.responses.events(response_id, after):
                    yield event
                return
            await asyncio.sleep(_POLL)

    async def reap(self, row: dict[str, Any]) -> dict[str, Any]:
        """`row`, marked failed first if it is an unfinished background response whose job died."""
        if (
            not row["background"]
            or row["status"] not in UNFINISHED
            or row["id"] in self._jobs
            or (row["heartbeat"] or 0) >= time.time() - self.timeout
        ):
            return row
        return await self._fail(row)

    async def reap_all(self) -> None:
        """Mark failed every background response whose job died (at start-up)."""
        for row in await self.store.responses.orphans(self.timeout):
            if row["id"] not in self._jobs:
                await self._fail(row)

    async def _fail(self, row: dict[str, Any]) -> dict[str, Any]:
        response = {
            **row["response"],
            "status": "failed",
            "error": {"code": "server_error", "message": _GONE_MESSAGE},
        }
        status = await self.store.responses.settle(row["id"], response)
        log.warning("background response %s: %s", row["id"], _GONE_MESSAGE)
        return {**row, "status": status, "response": {**response, "status": status}}

    async def _work(
        self, row: dict[str, Any], events: AsyncGenerator[dict[str, Any], None], job: _Job
    ) -> None:
        response_id = row["id"]
        writer = asyncio.create_task(self._write_until_done(response_id, job))
        try:
            row["response"]["status"] = "in_progress"
            if await self.store.responses.settle(response_id, row["response"]) == "in_progress":
                async for event in events:  # else it was cancelled before it began
                    job.add(event)
        except Exception:
            log.exception("background response %s failed", response_id)
        finally:
            with anyio.CancelScope(shield=True):
                await events.aclose()  # a cancelled job keeps what it produced, marked cancelled
                job.done = True
                job.changed.set()
                await writer  # the last events are written before the job is forgotten
            self._jobs.pop(response_id, None)

    async def _write_until_done(self, response_id: str, job: _Job) -> None:
        """Write the job's events in batches, with a heartbeat when there are none, until it is done; stop
        the job if its stored status says another replica cancelled it."""
        beat = time.monotonic()
        while not (job.done and job.written == len(job.events)):
            if not job.done:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_ended(job), FLUSH)
            if job.written == len(job.events) and time.monotonic() - beat < self.heartbeat and not job.done:
                continue
            pending = job.events[job.written :]
            try:
                status = await self.store.responses.add_events(response_id, pending, heartbeat=True)
            except Exception:  # the store is down: logged there; the events stay in memory for followers here
                if job.done:
                    return
                continue
            job.written += len(pending)
            beat = time.monotonic()
            if status == "cancelled" and not job.done:
                job.stop()


async def _ended(job: _Job) -> None:
    while not job.done:
        await job.changed.wait()
