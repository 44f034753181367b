"""`OpenAI`: the `openai` SDK's own blocking client, with its requests answered by the service in this
process, on the service's event loop (a server's, when one runs it; else a loop of the client's own)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Coroutine
from functools import cached_property
from typing import Any, TypeVar

import openai

from modelport.client.arguments import build_service
from modelport.client.dispatch import Dispatch, sdk_arguments
from modelport.client.realtime_pipes import LocalRealtime
from modelport.client.sdk_errors import sdk_errors
from modelport.client.streams import LocalStream
from modelport.protocol.sdk_private import FinalRequestOptions, StreamT
from modelport.settings import Settings

T = TypeVar("T")
ResponseT = TypeVar("ResponseT")


class _Loop:
    """The event loop the client's calls run in: the loop of the service it was given, when a server already
    runs that service (one service, one loop), else a loop of its own on a daemon thread, so blocking
    callers never hold up interpreter exit."""

    def __init__(self, running: asyncio.AbstractEventLoop | None = None) -> None:
        self.own = running is None or not running.is_running()
        if running is None or self.own:
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self.loop.run_forever, name="modelport-client", daemon=True).start()
        else:
            self.loop = running
        self._settling: set[asyncio.Future[object]] = set()  # kept until done: the loop holds tasks weakly

    def run(self, awaitable: Awaitable[T]) -> T:
        """Wait for `awaitable` on the loop."""
        try:
            in_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            in_loop = False
        if in_loop:
            if isinstance(awaitable, Coroutine):
                awaitable.close()
            raise RuntimeError("the blocking client cannot wait in its own event loop; use AsyncOpenAI there")
        return asyncio.run_coroutine_threadsafe(_awaited(awaitable), self.loop).result()

    def settle(self, awaitable: Awaitable[object]) -> None:
        """Run `awaitable` to its end, or (called from the loop itself: a stream collected there) soon."""
        try:
            in_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            in_loop = False
        if in_loop:
            task = asyncio.ensure_future(awaitable)
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)
        else:
            self.run(awaitable)

    def close(self) -> None:
        if self.own:
            self.loop.call_soon_threadsafe(self.loop.stop)


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


class OpenAI(openai.OpenAI):
    """Drop-in for `openai.OpenAI` that runs the models in this process: same methods, same types.

    With no arguments it serves the default models, each loaded on first use. `config` reads a
    `models.toml`; `service` shares one already built (when a server already runs it, the client's calls run
    in the server's event loop). `api_key`, when given, is checked as the server checks a bearer key;
    without one, calls are the default project's. The SDK's other options are accepted; `base_url` is
    ignored.
    """

    def __init__(
        self,
        *,
        config: str | os.PathLike[str] | None = None,
        settings: Settings | None = None,
        service: Any = None,
        preload: bool = False,
        api_key: str | None = None,
        **options: Any,
    ) -> None:
        self.service = build_service(service, settings, config, preload=False)
        self._owns_service = service is None
        self._dispatch = Dispatch(self.service, api_key)
        self._loop = _Loop(self.service.loop)
        if preload:
            self._loop.run(self.service.manager.load_all())
        super().__init__(**sdk_arguments(api_key, options, openai.DefaultHttpxClient))

    @cached_property
    def realtime(self) -> LocalRealtime:
        """The Realtime API; `connect()` opens a session in this process, no socket."""
        return LocalRealtime(self)

    def request(
        self,
        cast_to: type[ResponseT],
        options: FinalRequestOptions,
        *,
        stream: bool = False,
        stream_cls: type[StreamT] | None = None,
    ) -> Any:
        """The SDK's one chokepoint: answered by the service, on its loop."""
        cast_to = self._maybe_override_cast_to(cast_to, options)
        answer, headers = self._loop.run(self._dispatch.answer(options))
        shaped = self._dispatch.shaped(self, answer, headers, options, cast_to, stream, pull=self._loop.run)
        if shaped.events is not None:
            return LocalStream(shaped.events, shaped.path, self, cast_to, self._loop)
        if shaped.response is None:
            return shaped.value
        with sdk_errors(shaped.path):
            return self._process_response(
                cast_to=cast_to,
                options=options,
                response=shaped.response,
                stream=stream,
                stream_cls=stream_cls,
            )

    def close(self) -> None:
        """Close the service (one this client built, or one that runs on this client's own event loop,
        which nothing else runs once it stops: its pending usage is written, its connections closed) and
        stop the loop's thread."""
        if self._owns_service or self._loop.own:
            self._loop.run(self.service.close())
        self._loop.close()
        super().close()
