"""Calling predictors off the event loop, within their model's concurrency limit, with clean errors."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio

from modelport.errors import ModelportError, PredictorError, PredictorTimeoutError
from modelport.predictors.abilities import Bunching
from modelport.predictors.contract import Predictor
from modelport.predictors.manager import LoadedModel
from modelport.predictors.relay import Relay
from modelport.service.watchdog import watched

T = TypeVar("T")
_END = object()
# How long an item of a whole answer may wait to be handed over with those after it: the serving thread is
# woken a few times a second, not at every token, and the answer's end still comes at once.
BUNCH_SECONDS = 0.1


@contextmanager
def predictor_errors(predictor: Predictor | Relay) -> Iterator[None]:
    """Turn anything a predictor raises, other than our own typed errors, into a 500 naming it."""
    try:
        yield
    except ModelportError:
        raise
    except Exception as error:
        raise PredictorError(
            f"predictor `{predictor.name}` failed: {type(error).__name__}: {error}"
        ) from error


async def call(model: LoadedModel, predictor: Predictor, fn: Callable[[], T]) -> T:
    """Run one blocking predictor call in a worker thread, holding one of the model's slots."""
    with watched(model, predictor.name) as progress:
        async with model.slots.hold():
            progress.now("the predictor's answer")
            with predictor_errors(predictor), timeout(model, predictor):
                return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)


@contextmanager
def timeout(model: LoadedModel, predictor: Predictor) -> Iterator[None]:
    """A 504 when the predictor takes longer than its model's `timeout` for a call (or for each item of a
    stream). A thread cannot be stopped from outside: a hung predictor's thread is left to finish."""
    try:
        with anyio.fail_after(model.spec.timeout):
            yield
    except TimeoutError:
        raise _late(predictor, model) from None


def _late(predictor: Predictor, model: LoadedModel) -> PredictorTimeoutError:
    return PredictorTimeoutError(
        f"predictor `{predictor.name}` took longer than {model.spec.timeout:g} s.", param=None
    )


class _Deadline:
    """A stream's per-item timeout (its model's `timeout` for each item) as one timer for the whole stream:
    every token of a stream passes here, so an item only moves the deadline (a float) where a timer per
    item (created, then cancelled) cost more; the timer, firing before the deadline it finds, waits again
    for that. Only a wait for an item is timed, not the reader's own work between items."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.loop = asyncio.get_running_loop()
        self.task: asyncio.Task[Any] | None = None  # the one waiting for an item; None between items
        self.due = self.loop.time() + seconds
        self.expired = False
        self.handle = self.loop.call_at(self.due, self._check)

    def waiting(self) -> None:
        self.task, self.due = asyncio.current_task(), self.loop.time() + self.seconds

    def _check(self) -> None:
        now = self.loop.time()
        if self.task is None:  # between items: look again a timeout from now
            self.handle = self.loop.call_at(now + self.seconds, self._check)
        elif now < self.due:  # an item came since: wait for the deadline it set
            self.handle = self.loop.call_at(self.due, self._check)
        else:
            self.expired = True
            self.task.cancel()

    def timed_out(self) -> bool:
        """Whether the cancellation being handled is this deadline's (and no one else's)."""
        return self.expired and self.task is not None and self.task.uncancel() == 0


async def iterate(
    model: LoadedModel, predictor: Predictor, start: Callable[[], Any], whole: bool = False
) -> AsyncGenerator[Any, None]:
    """Call a predictor that returns an iterator (or a whole value) and yield its items.

    The model's slot is held until the iteration ends or is closed; closing also closes the predictor's
    iterator, which is how a disconnected client stops a generation. The watchdog is told of each step.
    For a caller that needs only the `whole` answer, a stream that can hand its items over in bunches does.
    """
    with watched(model, predictor.name) as progress:
        async with model.slots.hold():
            progress.now("the predictor to start")
            with predictor_errors(predictor):
                with timeout(model, predictor):
                    result = await anyio.to_thread.run_sync(start, abandon_on_cancel=True)
                progress.now("the predictor's first item")
                if not isinstance(result, AsyncIterator | Iterator):
                    yield result
                    return
                if whole and isinstance(result, Bunching):
                    result.bunch(BUNCH_SECONDS)
                step = _step(result)
                deadline = _Deadline(model.spec.timeout)
                try:
                    while True:
                        deadline.waiting()
                        try:
                            item = await step()
                        except StopAsyncIteration:
                            break
                        except asyncio.CancelledError:
                            if deadline.timed_out():
                                raise _late(predictor, model) from None
                            raise
                        finally:
                            deadline.task = None
                        if item is _END:
                            break
                        progress.item()
                        yield item
                finally:
                    deadline.handle.cancel()
                    await _close(result)


def _step(items: AsyncIterator[Any] | Iterator[Any]) -> Callable[[], Awaitable[Any]]:
    """What awaits the next item (`_END`, or StopAsyncIteration, after the last): an async iterator's read
    on the event loop (no thread hop, and no coroutine of ours, per item), a blocking one's in a worker
    thread."""
    if isinstance(items, AsyncIterator):
        return items.__anext__
    return lambda: anyio.to_thread.run_sync(next, items, _END, abandon_on_cancel=True)


async def _close(items: AsyncIterator[Any] | Iterator[Any]) -> None:
    """Close a predictor's iterator (which stops its generation), if it can be closed."""
    if isinstance(items, AsyncIterator):
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            await aclose()
        return
    close = getattr(items, "close", None)
    if close is not None:
        with contextlib.suppress(ValueError):  # still running in a thread left after a timeout
            close()


async def eager(stream: AsyncGenerator[T, None]) -> AsyncGenerator[T, None]:
    """Pull the first item now, so errors before any output reach the caller as a status, not mid-stream."""
    try:
        first = await stream.__anext__()
    except StopAsyncIteration:
        first = _END  # type: ignore[assignment]
    except BaseException:
        await stream.aclose()
        raise

    async def rest() -> AsyncGenerator[T, None]:
        try:
            if first is not _END:
                yield first
            async for item in stream:
                yield item
        finally:
            await stream.aclose()

    return rest()


def merge(streams: list[AsyncGenerator[T, None]], at_once: int | None = None) -> AsyncGenerator[T, None]:
    """Items of several streams as each produces them, at most `at_once` of them running (the next starts
    as one ends); closing the merge closes every stream. One stream is its own merge: every token of a plain
    answer crosses this, and a layer that only passes items on costs the serving thread a hop per token."""
    return streams[0] if len(streams) == 1 else _merged(streams, at_once or len(streams))


async def _merged(streams: list[AsyncGenerator[T, None]], at_once: int) -> AsyncGenerator[T, None]:
    waiting = collections.deque(streams)
    pending: dict[asyncio.Future[T], AsyncGenerator[T, None]] = {}

    def start() -> None:
        if waiting:
            stream = waiting.popleft()
            pending[asyncio.ensure_future(anext(stream))] = stream

    for _ in range(at_once):
        start()
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                stream = pending.pop(future)
                try:
                    item = future.result()
                except StopAsyncIteration:
                    start()
                    continue
                pending[asyncio.ensure_future(anext(stream))] = stream
                yield item
    finally:
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for stream in streams:
            await stream.aclose()
