"""`OpenAI`: the SDK's blocking surface, running `AsyncOpenAI` on a private event loop thread."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Generic, TypeVar

from openai.pagination import AsyncPage, SyncPage

from modelport.client.async_client import AsyncOpenAI
from modelport.client.paginators import AsyncCursorPage, AsyncPaginator
from modelport.client.sdk_render import AsyncStream
from modelport.service import Service
from modelport.settings import Settings

T = TypeVar("T")


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

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        try:
            in_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            in_loop = False
        if in_loop:
            coroutine.close()
            raise RuntimeError("the blocking client cannot wait in its own event loop; use AsyncOpenAI there")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        if self.own:
            self.loop.call_soon_threadsafe(self.loop.stop)


class Stream(Generic[T]):
    """Like the SDK's `Stream`: iterate over chunks, `close()`, use as a context manager."""

    def __init__(self, loop: _Loop, chunks: AsyncStream[T]) -> None:
        self._loop = loop
        self._chunks = chunks

    def __iter__(self) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self._loop.run(self._chunks.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self.close()

    def close(self) -> None:
        """Stop the generation and free its slot."""
        self._loop.run(self._chunks.close())

    def __enter__(self) -> Stream[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Blocking:
    """Mirrors an async resource: its coroutine methods become blocking calls, sub-resources recurse."""

    def __init__(self, loop: _Loop, target: Any) -> None:
        self._loop = loop
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if inspect.iscoroutinefunction(attr):

            def call(*args: Any, **kwargs: Any) -> Any:
                return self._blocking_result(self._loop.run(attr(*args, **kwargs)))

        elif inspect.isasyncgenfunction(attr):

            def call(*args: Any, **kwargs: Any) -> Any:
                return _blocking_iterator(self._loop, attr(*args, **kwargs))

        elif callable(attr):

            def call(*args: Any, **kwargs: Any) -> Any:
                result = attr(*args, **kwargs)
                if isinstance(result, AsyncPaginator):
                    return CursorPage(self._loop, self._loop.run(result.first()))
                return _BlockingContext(self._loop, result) if hasattr(result, "__aenter__") else result

        elif isinstance(attr, str | bytes | int | float | dict | list | tuple | type(None)):
            return attr
        else:
            return _Blocking(self._loop, attr)
        call.__doc__ = attr.__doc__
        return call

    def __iter__(self) -> Iterator[Any]:
        """An async-iterable target (the stream helper's events) iterated from blocking code."""
        return _blocking_iterator(self._loop, aiter(self._target))

    def _blocking_result(self, result: Any) -> Any:
        if isinstance(result, AsyncStream):
            return Stream(self._loop, result)
        if isinstance(result, AsyncPage):
            return SyncPage[Any](data=result.data, object="list")
        return result


class CursorPage(Generic[T]):
    """Like the SDK's `SyncCursorPage`: `data`, `has_more`, `first_id`, `last_id`; iterating it walks every
    item of every page."""

    object = "list"

    def __init__(self, loop: _Loop, page: AsyncCursorPage[T]) -> None:
        self._loop = loop
        self._page = page
        self.data = page.data
        self.has_more = page.has_more
        self.first_id = page.first_id
        self.last_id = page.last_id

    def has_next_page(self) -> bool:
        return self._page.has_next_page()

    def get_next_page(self) -> CursorPage[T]:
        """The page after this one."""
        return CursorPage(self._loop, self._loop.run(self._page.get_next_page()))

    def iter_pages(self) -> Iterator[CursorPage[T]]:
        """This page and every later one."""
        page = self
        yield page
        while page.has_next_page():
            page = page.get_next_page()
            yield page

    def __iter__(self) -> Iterator[T]:
        for page in self.iter_pages():
            yield from page.data


def _blocking_iterator(loop: _Loop, items: Any) -> Iterator[Any]:
    while True:
        try:
            yield loop.run(items.__anext__())
        except StopAsyncIteration:
            return


class _BlockingContext:
    """An async context manager entered and left from blocking code; what it yields is mirrored too."""

    def __init__(self, loop: _Loop, context: Any) -> None:
        self._loop = loop
        self._context = context

    def __enter__(self) -> Any:
        return _Blocking(self._loop, self._loop.run(self._context.__aenter__()))

    def __exit__(self, *exc: Any) -> None:
        self._loop.run(self._context.__aexit__(*exc))


class OpenAI:
    """Drop-in for `openai.OpenAI` that runs the models in this process: same methods, same types.

    With no arguments it serves the default models, each loaded on first use. `config` reads a
    `models.toml`; `service` shares one already built (when a server already runs it, the client's calls run
    in the server's event loop). `api_key`, `base_url` and other transport options of the SDK are accepted
    and ignored.
    """

    def __init__(
        self,
        *,
        config: str | os.PathLike[str] | None = None,
        settings: Settings | None = None,
        service: Service | None = None,
        preload: bool = False,
        **transport: Any,
    ) -> None:
        self._async = AsyncOpenAI(config=config, settings=settings, service=service, **transport)
        self.service = self._async.service
        self._loop = _Loop(self.service.loop)
        if preload:
            self._loop.run(self.service.manager.load_all())
        resource: Callable[[Any], Any] = lambda target: _Blocking(self._loop, target)  # noqa: E731
        self.models = resource(self._async.models)
        self.chat = resource(self._async.chat)
        self.completions = resource(self._async.completions)
        self.embeddings = resource(self._async.embeddings)
        self.audio = resource(self._async.audio)
        self.responses = resource(self._async.responses)
        self.files = resource(self._async.files)
        self.batches = resource(self._async.batches)
        self.conversations = resource(self._async.conversations)
        self.vector_stores = resource(self._async.vector_stores)

    def close(self) -> None:
        """Close upstream connections (of a service this client built) and stop its event loop thread."""
        self._loop.run(self._async.close())
        self._loop.close()

    def __enter__(self) -> OpenAI:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
