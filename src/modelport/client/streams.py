"""The SDK's own stream classes over the service's event streams: `openai.AsyncStream` and `openai.Stream`
whose events are the service's typed objects as they are made, not parsed from bytes. Everything the SDK
builds on a stream (`chat.completions.stream()`, `responses.stream()`, `close()`, context managers) works
on them unchanged.

A stream's events are read on the service's loop as they come, whatever its reader's pace (`StreamPump`), as
an HTTP server writes them into its socket: the work behind a stream its reader stopped reading without
closing it (a `break` out of a loop, an exception while reading) runs to its end and frees its model's
slot. Read only as its reader asked, such a stream held the slot as long as the reader held the stream: with
one slot, every later call to the model waited for ever."""

from __future__ import annotations

import asyncio
import atexit
import queue
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, Protocol, TypeVar

import httpx2
from openai import AsyncStream, Stream

from modelport.client.dispatch import BASE_URL, EVENT_STREAM
from modelport.client.sdk_errors import sdk_errors
from modelport.errors import ServerError
from modelport.protocol.answers import Events
from modelport.tasks import stopped

T = TypeVar("T")
_ITEM, _END, _FAILED = "item", "end", "failed"
_DONE = object()  # what a reader takes at the end
Taken = tuple[str, Any]  # what a reader takes: an event, the end, or the error the stream failed with


class Runner(Protocol):
    """The loop the service runs on, seen from a blocking caller."""

    def run(self, awaitable: Awaitable[T]) -> T:
        """Wait for `awaitable` on the loop."""
        ...

    def settle(self, awaitable: Awaitable[object]) -> None:
        """Run `awaitable` to its end, or soon when called from the loop itself."""
        ...


class StreamPump:
    """A stream's events read on the service's loop as they come, each handed to `put` as it is made (then
    its end, or the error it failed with), whatever its reader's pace; `stop()` stops the reading and the work
    behind the events."""

    def __init__(self, events: Events[Any], put: Callable[[Taken], None]) -> None:
        self.events = events
        self.put = put
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Begin reading (on the service's loop)."""
        self.task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        typed = self.events.typed()
        ended = False
        try:
            async for item in typed:
                self.put((_ITEM, item))
            ended = True
            self.put((_END, None))
        except Exception as error:  # the reader raises it, as the SDK raises a stream's error
            ended = True
            self.put((_FAILED, error))
        finally:
            if not ended:  # stopped by another than the reader (the service closing)
                self.put((_FAILED, ServerError("the stream stopped before its end")))
            await typed.aclose()

    async def stop(self) -> None:
        """Stop reading, and the work behind the events."""
        try:
            if self.task is not None and not self.task.done():
                await stopped(self.task)
        finally:
            await self.events.aclose()


def _taken(taken: Taken, path: str) -> Any:
    """The event a reader took (`_DONE` at the end; an error raised as the SDK's)."""
    kind, value = taken
    if kind == _FAILED:
        with sdk_errors(path):
            raise value
    return value if kind == _ITEM else _DONE


class _Closer(httpx2.AsyncByteStream, httpx2.SyncByteStream):
    """The stream's `response` body: closing it (as the SDK closes a stream) stops the work behind it."""

    def __init__(self, pump: StreamPump, runner: Runner | None) -> None:
        self.pump = pump
        self.runner = runner

    async def aclose(self) -> None:
        await self.pump.stop()

    def close(self) -> None:
        assert self.runner is not None
        self.runner.settle(self.pump.stop())


def _response(pump: StreamPump, path: str, runner: Runner | None) -> httpx2.Response:
    return httpx2.Response(
        200,
        headers={"content-type": EVENT_STREAM},
        stream=_Closer(pump, runner),
        request=httpx2.Request("POST", BASE_URL + path),
    )


class LocalAsyncStream(AsyncStream[T]):
    """`openai.AsyncStream` over the service's events, read ahead on its loop (`start()` begins)."""

    def __init__(self, events: Events[Any], path: str, client: Any, cast_to: type[T]) -> None:
        self._taken: asyncio.Queue[Taken] = asyncio.Queue()
        self._pump = StreamPump(events, self._taken.put_nowait)
        self.response = _response(self._pump, path, None)
        self._cast_to = cast_to
        self._client = client
        self._options = None
        self._path = path
        self._iterator = self.__stream__()

    async def start(self) -> LocalAsyncStream[T]:
        await self._pump.start()
        return self

    async def __stream__(self) -> AsyncIterator[T]:
        try:
            while (item := _taken(await self._taken.get(), self._path)) is not _DONE:
                yield item
        finally:
            await self._pump.stop()


class LocalStream(Stream[T]):
    """`openai.Stream` over the service's events, read ahead on the loop the service runs on."""

    def __init__(self, events: Events[Any], path: str, client: Any, cast_to: type[T], runner: Runner) -> None:
        self._taken: queue.SimpleQueue[Taken] = queue.SimpleQueue()
        self._pump = StreamPump(events, self._taken.put)
        self.response = _response(self._pump, path, runner)
        self._cast_to = cast_to
        self._client = client
        self._options = None
        self._path = path
        self._runner = runner
        self._generator = self.__stream__()
        self._iterator = self._generator
        runner.run(self._pump.start())
        _OPEN.add(self)

    def __stream__(self) -> Generator[T, None, None]:
        try:
            while (item := _taken(self._taken.get(), self._path)) is not _DONE:
                yield item
        finally:
            self._runner.settle(self._pump.stop())


# The blocking streams not yet read to their end or closed. A program may end with some open: they are
# closed at exit, while the client's loop still runs, so that what each holds (a generation, its usage)
# ends as a closed stream's does; left to the interpreter's finalising, their loop would be gone. One never
# read has a generator that never ran: its reading is stopped through its response, as the SDK closes it.
_OPEN: weakref.WeakSet[LocalStream[Any]] = weakref.WeakSet()


@atexit.register
def _close_open() -> None:
    for stream in list(_OPEN):
        stream._generator.close()
        stream.response.close()
