"""`client.files` and `client.batches` in-process, with the SDK's surface and types."""

from __future__ import annotations

import io
from typing import Any

from openai._legacy_response import HttpxBinaryResponseContent
from openai.types import Batch, FileDeleted, FileObject

from modelport.client.arguments import read_file, request
from modelport.client.paginators import AsyncPaginator
from modelport.client.sdk_errors import sdk_errors
from modelport.client.sdk_render import render
from modelport.protocol.requests import MetadataUpdate
from modelport.service import Service
from modelport.service.state.listing import ListPage


class AsyncFiles:
    """`client.files`."""

    def __init__(self, service: Service) -> None:
        self._service = service

    async def create(
        self, *, file: Any, purpose: str, expires_after: dict[str, Any] | None = None, **_: Any
    ) -> FileObject:
        """Upload a file (a path, bytes, a file object or a (name, content) tuple)."""
        upload = read_file(file)
        with sdk_errors("/files"):
            return await self._service.files.create(
                io.BytesIO(upload.content), upload.name, purpose, expires_after
            )

    async def retrieve(self, file_id: str, **_: Any) -> FileObject:
        """One file's record."""
        with sdk_errors(f"/files/{file_id}"):
            return await self._service.files.retrieve(file_id)

    def list(
        self,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        purpose: str | None = None,
        **_: Any,
    ) -> AsyncPaginator[FileObject]:
        """Files, newest first; `purpose` filters."""

        async def fetch(cursor: str | None) -> ListPage[FileObject]:
            return await self._service.files.list(
                after=cursor or after, limit=limit, order=order, purpose=purpose
            )

        return AsyncPaginator(fetch, "/files")

    async def content(self, file_id: str, **_: Any) -> HttpxBinaryResponseContent:
        """A file's bytes, as the SDK's binary response."""
        with sdk_errors(f"/files/{file_id}/content"):
            content: HttpxBinaryResponseContent = await render(await self._service.files.content(file_id), "")
            return content

    async def delete(self, file_id: str, **_: Any) -> FileDeleted:
        """Delete a file."""
        with sdk_errors(f"/files/{file_id}"):
            return await self._service.files.delete(file_id)


class AsyncBatches:
    """`client.batches`."""

    def __init__(self, service: Service) -> None:
        self._service = service

    async def create(
        self,
        *,
        input_file_id: str,
        endpoint: str,
        completion_window: str = "24h",
        metadata: dict[str, str] | None = None,
        **_: Any,
    ) -> Batch:
        """Run a file of requests in the background (in this process's event loop)."""
        with sdk_errors("/batches"):
            checked = request(MetadataUpdate, {"metadata": metadata})
            return await self._service.batches.create(
                input_file_id=input_file_id,
                endpoint=endpoint,
                completion_window=completion_window,
                metadata=checked.metadata,
            )

    async def retrieve(self, batch_id: str, **_: Any) -> Batch:
        """A batch's state and counts."""
        with sdk_errors(f"/batches/{batch_id}"):
            return await self._service.batches.retrieve(batch_id)

    def list(self, *, after: str | None = None, limit: int | None = None, **_: Any) -> AsyncPaginator[Batch]:
        """Batches, newest first."""

        async def fetch(cursor: str | None) -> ListPage[Batch]:
            return await self._service.batches.list(after=cursor or after, limit=limit)

        return AsyncPaginator(fetch, "/batches")

    async def cancel(self, batch_id: str, **_: Any) -> Batch:
        """Stop a batch; what it did is kept."""
        with sdk_errors(f"/batches/{batch_id}/cancel"):
            return await self._service.batches.cancel(batch_id)
