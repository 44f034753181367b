"""Realtime in-process: `client.realtime.connect()` on the in-process clients opens a session in the service
with no socket. The SDK's own connection classes are kept (same methods, same event types); only the
WebSocket under them is replaced by a pipe into the session, which carries the same messages: client
events in as JSON, server events out as JSON. The key the client was given is checked as a WebSocket's is
and its project is the session's."""

from __future__ import annotations

import asyncio
import contextvars
import queue
from collections.abc import Awaitable
from typing import Any, TypeVar

from openai.resources.realtime import AsyncRealtime, Realtime
from websockets.exceptions import ConnectionClosedOK
from websockets.frames import Close

from modelport import context
from modelport.client.sdk_errors import sdk_errors
from modelport.context import RequestContext
from modelport.service import Service
from modelport.service.access import acting_as
from modelport.service.realtime import RealtimeSession
from modelport.service.realtime.realtime_events import Outgoing, wire

T = TypeVar("T")
_CLOSED = b""  # what a pipe yields once its session is closed
_NORMAL = Close(1000, "")


async def _opened(
    service: Service, api_key: str | None, query: dict[str, Any], deliver: Any
) -> tuple[RealtimeSession, RequestContext]:
    """A session for the SDK's connection, as the WebSocket route opens one (the key checked, its project
    taken); and the request context its events are served in."""
    with sdk_errors("/realtime"):
        principal = None
        if api_key is not None:
            principal = await service.access.identify(f"Bearer {api_key}", realtime=True)
        request = acting_as(principal, context.current())
        given = principal.session if principal is not None else None
        opening = service.realtime.open(query.get("model"), query.get("intent"), deliver, False, given)
        return await _within(request, opening), request


async def _within(request: RequestContext, work: Awaitable[T]) -> T:
    """`work` as the session's caller (its project: the work it starts is counted to it), without
    changing the context of the task that awaits it."""
    scope = contextvars.copy_context()
    scope.run(context.enter, request)
    return await asyncio.create_task(_awaited(work), context=scope)


async def _awaited(work: Awaitable[T]) -> T:
    return await work


class AsyncPipe:
    """An async WebSocket's methods the SDK uses, over a session on the same event loop."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[bytes] = asyncio.Queue()
        self.session: RealtimeSession | None = None
        self.request = RequestContext()

    async def deliver(self, event: Outgoing) -> None:
        self.messages.put_nowait(wire(event).encode())

    async def send(self, data: str | bytes) -> None:
        assert self.session is not None
        await _within(self.request, self.session.receive(data))

    async def recv(self, decode: bool | None = None) -> bytes:
        message = await self.messages.get()
        if message is _CLOSED:
            self.messages.put_nowait(_CLOSED)
            raise ConnectionClosedOK(_NORMAL, _NORMAL)
        return message

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.session is not None:
            await self.session.close()
        self.messages.put_nowait(_CLOSED)


class SyncPipe:
    """A blocking WebSocket's methods the SDK uses, over a session on the client's event loop thread."""

    def __init__(self, run: Any) -> None:
        self.run = run  # waits for a coroutine on the loop the service runs on
        self.messages: queue.Queue[bytes] = queue.Queue()
        self.session: RealtimeSession | None = None
        self.request = RequestContext()

    async def deliver(self, event: Outgoing) -> None:
        self.messages.put(wire(event).encode())

    def send(self, data: str | bytes) -> None:
        assert self.session is not None
        self.run(_within(self.request, self.session.receive(data)))

    def recv(self, decode: bool | None = None, timeout: float | None = None) -> bytes:
        message = self.messages.get(timeout=timeout)
        if message is _CLOSED:
            self.messages.put(_CLOSED)
            raise ConnectionClosedOK(_NORMAL, _NORMAL)
        return message

    def close(self, code: int = 1000, reason: str = "") -> None:
        if self.session is not None:
            self.run(self.session.close())
        self.messages.put(_CLOSED)


class LocalRealtime(Realtime):
    """`client.realtime` of the blocking in-process client: `connect()` opens a session in-process."""

    def connect(self, **options: Any) -> Any:
        manager = super().connect(**options)
        client: Any = self._client

        def pipe(query: dict[str, Any], headers: Any) -> SyncPipe:
            opened = SyncPipe(client._loop.run)
            wanted = {**query, "model": options.get("model")}
            opened.session, opened.request = client._loop.run(
                _opened(client.service, client._dispatch.api_key, wanted, opened.deliver)
            )
            return opened

        # The manager's one way to a WebSocket, replaced: a pipe into the session instead.
        manager._connect_ws = pipe  # type: ignore[method-assign,assignment]
        return manager


class LocalAsyncRealtime(AsyncRealtime):
    """`client.realtime` of the async in-process client: `connect()` opens a session in-process."""

    def connect(self, **options: Any) -> Any:
        manager = super().connect(**options)
        client: Any = self._client

        async def pipe(query: dict[str, Any], headers: Any) -> AsyncPipe:
            opened = AsyncPipe()
            wanted = {**query, "model": options.get("model")}
            opened.session, opened.request = await _opened(
                client.service, client._dispatch.api_key, wanted, opened.deliver
            )
            return opened

        manager._connect_ws = pipe  # type: ignore[method-assign,assignment]
        return manager
