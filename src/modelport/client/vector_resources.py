"""`client.vector_stores` in-process: stores, their files and file batches, and search, with the SDK's
surface and types (the `…_and_poll` helpers included)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from openai.types import VectorStore, VectorStoreDeleted, VectorStoreSearchResponse
from openai.types.vector_stores import (
    FileContentResponse,
    VectorStoreFile,
    VectorStoreFileBatch,
    VectorStoreFileDeleted,
)

from modelport.client.arguments import request
from modelport.client.file_resources import AsyncFiles
from modelport.client.paginators import AsyncCursorPage, AsyncPaginator, Fetch
from modelport.client.sdk_errors import sdk_errors
from modelport.protocol.vector_requests import (
    FileBatchCreate,
    VectorStoreCreate,
    VectorStoreFileCreate,
    VectorStoreFileUpdate,
    VectorStoreSearch,
    VectorStoreUpdate,
)
from modelport.service import Service
from modelport.service.state.listing import ListPage

_POLL_SECONDS = 0.1
Settling = TypeVar("Settling", VectorStoreFile, VectorStoreFileBatch)


class AsyncVectorStores:
    """`client.vector_stores`."""

    def __init__(self, service: Service, files: AsyncFiles) -> None:
        self._stores = service.vector_stores
        self.files = AsyncVectorStoreFiles(service, files)
        self.file_batches = AsyncFileBatches(service, files)

    async def create(self, **params: Any) -> VectorStore:
        """A new vector store (`file_ids`, `chunking_strategy`, `expires_after`, `metadata`, `name`)."""
        with sdk_errors("/vector_stores"):
            return await self._stores.create(request(VectorStoreCreate, params))

    async def retrieve(self, vector_store_id: str, **_: Any) -> VectorStore:
        """One vector store."""
        with sdk_errors(f"/vector_stores/{vector_store_id}"):
            return await self._stores.retrieve(vector_store_id)

    async def update(self, vector_store_id: str, **params: Any) -> VectorStore:
        """Change its name, metadata or expiry."""
        with sdk_errors(f"/vector_stores/{vector_store_id}"):
            return await self._stores.update(vector_store_id, request(VectorStoreUpdate, params))

    def list(
        self,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        **_: Any,
    ) -> AsyncPaginator[VectorStore]:
        """The vector stores, newest first unless `order="asc"`."""

        async def fetch(cursor: str | None) -> ListPage[VectorStore]:
            first = cursor is None
            return await self._stores.list_stores(
                after=cursor or after, before=before if first else None, limit=limit, order=order
            )

        return AsyncPaginator(fetch, "/vector_stores")

    async def delete(self, vector_store_id: str, **_: Any) -> VectorStoreDeleted:
        """Delete a vector store (its files stay)."""
        with sdk_errors(f"/vector_stores/{vector_store_id}"):
            return await self._stores.delete(vector_store_id)

    async def search(self, vector_store_id: str, **params: Any) -> AsyncCursorPage[VectorStoreSearchResponse]:
        """Hybrid search of a vector store: one page of results."""
        path = f"/vector_stores/{vector_store_id}/search"
        with sdk_errors(path):
            found = await self._stores.search(vector_store_id, request(VectorStoreSearch, params))
        results = [VectorStoreSearchResponse.model_validate(r) for r in found["data"]]
        return AsyncCursorPage(ListPage(results, False), _nothing_more, path)


class AsyncVectorStoreFiles:
    """`client.vector_stores.files`."""

    def __init__(self, service: Service, files: AsyncFiles) -> None:
        self._stores = service.vector_stores
        self._files = files

    async def create(self, vector_store_id: str, **params: Any) -> VectorStoreFile:
        """Put a file into a vector store (ingested in the background)."""
        with sdk_errors(f"/vector_stores/{vector_store_id}/files"):
            body = request(VectorStoreFileCreate, params)
            return await self._stores.attach(
                vector_store_id, body.file_id, body.attributes, body.chunking_strategy
            )

    async def retrieve(self, file_id: str, *, vector_store_id: str, **_: Any) -> VectorStoreFile:
        """One file of a vector store."""
        with sdk_errors(f"/vector_stores/{vector_store_id}/files/{file_id}"):
            return await self._stores.file(vector_store_id, file_id)

    async def update(self, file_id: str, *, vector_store_id: str, **params: Any) -> VectorStoreFile:
        """Replace a file's attributes."""
        with sdk_errors(f"/vector_stores/{vector_store_id}/files/{file_id}"):
            body = request(VectorStoreFileUpdate, params)
            return await self._stores.update_file(vector_store_id, file_id, body.attributes)

    def list(
        self,
        vector_store_id: str,
        *,
        after: str | None = None,
        before: str | None = None,
        filter: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        **_: Any,
    ) -> AsyncPaginator[VectorStoreFile]:
        """A vector store's files, by status with `filter`."""
        return AsyncPaginator(
            _files_fetch(self._stores.list_files, vector_store_id, None, after, before, filter, limit, order),
            f"/vector_stores/{vector_store_id}/files",
        )

    async def delete(self, file_id: str, *, vector_store_id: str, **_: Any) -> VectorStoreFileDeleted:
        """Take a file out of a vector store."""
        with sdk_errors(f"/vector_stores/{vector_store_id}/files/{file_id}"):
            return await self._stores.detach(vector_store_id, file_id)

    async def content(
        self, file_id: str, *, vector_store_id: str, **_: Any
    ) -> AsyncCursorPage[FileContentResponse]:
        """A file's chunks, as the store holds them."""
        path = f"/vector_stores/{vector_store_id}/files/{file_id}/content"
        with sdk_errors(path):
            page = await self._stores.file_content(vector_store_id, file_id)
        parts = [FileContentResponse.model_validate(part) for part in page["data"]]
        return AsyncCursorPage(ListPage(parts, False), _nothing_more, path)

    async def poll(self, file_id: str, *, vector_store_id: str, **_: Any) -> VectorStoreFile:
        """Until the file is no longer in progress."""
        return await _settled(lambda: self.retrieve(file_id, vector_store_id=vector_store_id))

    async def create_and_poll(self, file_id: str, *, vector_store_id: str, **params: Any) -> VectorStoreFile:
        """Put a file into a vector store and wait for it."""
        await self.create(vector_store_id, file_id=file_id, **params)
        return await self.poll(file_id, vector_store_id=vector_store_id)

    async def upload(self, *, vector_store_id: str, file: Any, **params: Any) -> VectorStoreFile:
        """Upload a file (purpose `assistants`) and put it into a vector store."""
        uploaded = await self._files.create(file=file, purpose="assistants")
        return await self.create(vector_store_id, file_id=uploaded.id, **params)

    async def upload_and_poll(self, *, vector_store_id: str, file: Any, **params: Any) -> VectorStoreFile:
        """Upload a file, put it into a vector store and wait for it."""
        uploaded = await self._files.create(file=file, purpose="assistants")
        return await self.create_and_poll(uploaded.id, vector_store_id=vector_store_id, **params)


class AsyncFileBatches:
    """`client.vector_stores.file_batches`."""

    def __init__(self, service: Service, files: AsyncFiles) -> None:
        self._stores = service.vector_stores
        self._files = files

    async def create(self, vector_store_id: str, **params: Any) -> VectorStoreFileBatch:
        """Several files into a vector store, followed as one batch."""
        with sdk_errors(f"/vector_stores/{vector_store_id}/file_batches"):
            return await self._stores.create_batch(vector_store_id, request(FileBatchCreate, params))

    async def retrieve(self, batch_id: str, *, vector_store_id: str, **_: Any) -> VectorStoreFileBatch:
        """One file batch."""
        with sdk_errors(f"/vector_stores/{vector_store_id}/file_batches/{batch_id}"):
            return await self._stores.batch(vector_store_id, batch_id)

    async def cancel(self, batch_id: str, *, vector_store_id: str, **_: Any) -> VectorStoreFileBatch:
        """Cancel what of a file batch is not yet ingested."""
        with sdk_errors(f"/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel"):
            return await self._stores.cancel_batch(vector_store_id, batch_id)

    def list_files(
        self,
        batch_id: str,
        *,
        vector_store_id: str,
        after: str | None = None,
        before: str | None = None,
        filter: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        **_: Any,
    ) -> AsyncPaginator[VectorStoreFile]:
        """A file batch's files."""
        return AsyncPaginator(
            _files_fetch(
                self._stores.list_files, vector_store_id, batch_id, after, before, filter, limit, order
            ),
            f"/vector_stores/{vector_store_id}/file_batches/{batch_id}/files",
        )

    async def poll(self, batch_id: str, *, vector_store_id: str, **_: Any) -> VectorStoreFileBatch:
        """Until the batch is no longer in progress."""
        return await _settled(lambda: self.retrieve(batch_id, vector_store_id=vector_store_id))

    async def create_and_poll(self, vector_store_id: str, **params: Any) -> VectorStoreFileBatch:
        """Several files into a vector store, and wait for them."""
        batch = await self.create(vector_store_id, **params)
        return await self.poll(batch.id, vector_store_id=vector_store_id)

    async def upload_and_poll(
        self, vector_store_id: str, *, files: list[Any], file_ids: list[str] | None = None, **params: Any
    ) -> VectorStoreFileBatch:
        """Upload files (purpose `assistants`) and put them, with `file_ids`, into a vector store."""
        uploaded = [await self._files.create(file=file, purpose="assistants") for file in files]
        ids = [*(file_ids or []), *(f.id for f in uploaded)]
        return await self.create_and_poll(vector_store_id, file_ids=ids, **params)


def _files_fetch(
    listing: Any,
    store_id: str,
    batch_id: str | None,
    after: str | None,
    before: str | None,
    status: str | None,
    limit: int | None,
    order: str | None,
) -> Fetch[VectorStoreFile]:
    async def fetch(cursor: str | None) -> ListPage[VectorStoreFile]:
        first = cursor is None
        page: ListPage[VectorStoreFile] = await listing(
            store_id, batch_id=batch_id, status=status, after=cursor or after,
            before=before if first else None, limit=limit, order=order,
        )  # fmt: skip
        return page

    return fetch


async def _settled(read: Callable[[], Awaitable[Settling]]) -> Settling:
    """What `read` gives once its status is no longer `in_progress` (the SDK's `poll`)."""
    while True:
        found = await read()
        if found.status != "in_progress":
            return found
        await asyncio.sleep(_POLL_SECONDS)


async def _nothing_more(_: str | None) -> ListPage[Any]:
    return ListPage([], False)
