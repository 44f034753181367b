"""In-process list pages with the SDK's surface: `data`, `has_more`, `first_id`, `last_id`, and iteration
over every item of every page (as the SDK's auto-pagination does)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

from modelport.client.sdk_errors import sdk_errors
from modelport.service.state.listing import ListPage

T = TypeVar("T")
Fetch = Callable[[str | None], Awaitable[ListPage[T]]]  # the page after an id (None: the first)


class AsyncCursorPage(Generic[T]):
    """One page; `async for` walks this page's items and every later page's."""

    object = "list"

    def __init__(self, page: ListPage[T], fetch: Fetch[T], path: str) -> None:
        self.data = page.data
        self.has_more = page.has_more
        self._fetch = fetch
        self._path = path

    @property
    def first_id(self) -> str | None:
        return _id(self.data[0]) if self.data else None

    @property
    def last_id(self) -> str | None:
        return _id(self.data[-1]) if self.data else None

    def has_next_page(self) -> bool:
        return self.has_more and bool(self.data)

    async def get_next_page(self) -> AsyncCursorPage[T]:
        """The page after this one."""
        with sdk_errors(self._path):
            return AsyncCursorPage(await self._fetch(self.last_id), self._fetch, self._path)

    async def iter_pages(self) -> AsyncIterator[AsyncCursorPage[T]]:
        """This page and every later one."""
        page = self
        yield page
        while page.has_next_page():
            page = await page.get_next_page()
            yield page

    async def __aiter__(self) -> AsyncIterator[T]:
        async for page in self.iter_pages():
            for item in page.data:
                yield item


class AsyncPaginator(Generic[T]):
    """What the SDK's async `list()` returns: `await` it for the first page, or `async for` the items."""

    def __init__(self, fetch: Fetch[T], path: str) -> None:
        self._fetch = fetch
        self._path = path

    async def first(self) -> AsyncCursorPage[T]:
        """The first page."""
        with sdk_errors(self._path):
            return AsyncCursorPage(await self._fetch(None), self._fetch, self._path)

    def __await__(self) -> Generator[Any, None, AsyncCursorPage[T]]:
        return self.first().__await__()

    async def __aiter__(self) -> AsyncIterator[T]:
        async for item in await self.first():
            yield item


def _id(item: Any) -> str | None:
    value = item.get("id") if isinstance(item, dict) else getattr(item, "id", None)
    return None if value is None else str(value)
