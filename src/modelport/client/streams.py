"""The SDK's own stream classes over the service's event streams: `openai.AsyncStream` and `openai.Stream`
whose events are the service's typed objects as they are made, not parsed from bytes. Everything the SDK
builds on a stream (`chat.completions.stream()`, `responses.stream()`, `close()`, context managers) works
on them unchanged."""

from __future__ import annotations

import atexit
import weakref
from collections.abc import AsyncIterator, Awaitable, Generator
from typing import Any, Protocol, TypeVar

import httpx2
from openai import AsyncStream, Stream

from modelport.client.dispatch import BASE_URL
from modelport.client.sdk_errors import sdk_errors
from modelport.protocol.answers import Events

T = TypeVar("T")


class Runner(Protocol):
    """The loop the service runs on, seen from a blocking caller."""

    def run(self, awaitable: Awaitable[T]) -> T:
        """Wait for `awaitable` on the loop."""
        ...

    def settle(self, awaitable: Awaitable[object]) -> None:
        """Run `awaitable` to its end, or soon when called from the loop itself."""
        ...


class _Closer(httpx2.AsyncByteStream, httpx2.SyncByteStream):
    """The stream's `response` body: closing it (as the SDK closes a stream) stops the work behind it."""

    def __init__(self, events: Events[Any], runner: Runner | None) -> None:
        self.events = events
        self.runner = runner

    async def aclose(self) -> None:
        await self.events.aclose()

    def close(self) -> None:
        assert self.runner is not None
        self.runner.settle(self.events.aclose())


def _response(events: Events[Any], path: str, runner: Runner | None) -> httpx2.Response:
    return httpx2.Response(
        200,
        headers={"content-type": "text/event-stream"},
        stream=_Closer(events, runner),
        request=httpx2.Request("POST", BASE_URL + path),
    )


class LocalAsyncStream(AsyncStream[T]):
    """`openai.AsyncStream` over the service's events."""

    def __init__(self, events: Events[Any], path: str, client: Any, cast_to: type[T]) -> None:
        self.response = _response(events, path, None)
        self._cast_to = cast_to
        self._client = client
        self._options = None
        self._events = events
        self._path = path
        self._iterator = self.__stream__()

    async def __stream__(self) -> AsyncIterator[T]:
        typed = self._events.typed()
        try:
            while True:
                with sdk_errors(self._path):
                    try:
                        item = await typed.__anext__()
                    except StopAsyncIteration:
                        return
                yield item
        finally:
            await typed.aclose()


class LocalStream(Stream[T]):
    """`openai.Stream` over the service's events, each pulled from the loop the service runs on."""

    def __init__(self, events: Events[Any], path: str, client: Any, cast_to: type[T], runner: Runner) -> None:
        self.response = _response(events, path, runner)
        self._cast_to = cast_to
        self._client = client
        self._options = None
        self._events = events
        self._path = path
        self._runner = runner
        self._generator = self.__stream__()
        self._iterator = self._generator
        _OPEN.add(self)

    def __stream__(self) -> Generator[T, None, None]:
        typed = self._events.typed()
        try:
            while True:
                with sdk_errors(self._path):
                    try:
                        item = self._runner.run(typed.__anext__())
                    except StopAsyncIteration:
                        return
                yield item
        finally:
            self._runner.settle(typed.aclose())


# The blocking streams not yet read to their end or closed. A program may end with some open: they are
# closed at exit, while the client's loop still runs, so that what each holds (a generation, its usage)
# ends as a closed stream's does; left to the interpreter's finalising, their loop would be gone.
_OPEN: weakref.WeakSet[LocalStream[Any]] = weakref.WeakSet()


@atexit.register
def _close_open() -> None:
    for stream in list(_OPEN):
        stream._generator.close()
