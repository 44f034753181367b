"""The Vector Stores API: stores, their files, file batches and search. Parse, call the service, render."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from modelport.protocol.vector_requests import (
    FileBatchCreate,
    VectorStoreCreate,
    VectorStoreFileCreate,
    VectorStoreFileUpdate,
    VectorStoreSearch,
    VectorStoreUpdate,
)
from modelport.server.http_render import json_body, render
from modelport.server.routes import service_of
from modelport.service.vectors import VectorStores

router = APIRouter(prefix="/vector_stores")


def _stores(request: Request) -> VectorStores:
    return service_of(request).vector_stores


@router.post("")
async def create_vector_store(request: Request, body: VectorStoreCreate) -> Response:
    """A new vector store; its files are ingested in the background."""
    return render(await _stores(request).create(body))


@router.get("")
async def list_vector_stores(
    request: Request,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> Response:
    """The caller's vector stores, newest first unless `order=asc`."""
    page = await _stores(request).list_stores(after=after, before=before, limit=limit, order=order)
    return render(page)


@router.get("/{vector_store_id}")
async def retrieve_vector_store(request: Request, vector_store_id: str) -> Response:
    """One vector store."""
    return render(await _stores(request).retrieve(vector_store_id))


@router.post("/{vector_store_id}")
async def update_vector_store(request: Request, vector_store_id: str, body: VectorStoreUpdate) -> Response:
    """Change a vector store's name, metadata or expiry."""
    return render(await _stores(request).update(vector_store_id, body))


@router.delete("/{vector_store_id}")
async def delete_vector_store(request: Request, vector_store_id: str) -> Response:
    """Delete a vector store (its files stay in the Files API)."""
    return render(await _stores(request).delete(vector_store_id))


@router.post("/{vector_store_id}/search")
async def search_vector_store(request: Request, vector_store_id: str, body: VectorStoreSearch) -> Response:
    """Hybrid search of a vector store."""
    return json_body(await _stores(request).search(vector_store_id, body))


@router.post("/{vector_store_id}/files")
async def attach_file(request: Request, vector_store_id: str, body: VectorStoreFileCreate) -> Response:
    """Put a file into a vector store."""
    stores = _stores(request)
    return render(await stores.attach(vector_store_id, body.file_id, body.attributes, body.chunking_strategy))


@router.get("/{vector_store_id}/files")
async def list_files(
    request: Request,
    vector_store_id: str,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    filter: str | None = None,
) -> Response:
    """A vector store's files, by status with `filter`."""
    page = await _stores(request).list_files(
        vector_store_id, status=filter, after=after, before=before, limit=limit, order=order
    )
    return render(page)


@router.get("/{vector_store_id}/files/{file_id}")
async def retrieve_file(request: Request, vector_store_id: str, file_id: str) -> Response:
    """One file of a vector store."""
    return render(await _stores(request).file(vector_store_id, file_id))


@router.post("/{vector_store_id}/files/{file_id}")
async def update_file(
    request: Request, vector_store_id: str, file_id: str, body: VectorStoreFileUpdate
) -> Response:
    """Replace a file's attributes."""
    return render(await _stores(request).update_file(vector_store_id, file_id, body.attributes))


@router.delete("/{vector_store_id}/files/{file_id}")
async def detach_file(request: Request, vector_store_id: str, file_id: str) -> Response:
    """Take a file out of a vector store."""
    return render(await _stores(request).detach(vector_store_id, file_id))


@router.get("/{vector_store_id}/files/{file_id}/content")
async def file_content(request: Request, vector_store_id: str, file_id: str) -> Response:
    """A file's chunks, as the store holds them."""
    return json_body(await _stores(request).file_content(vector_store_id, file_id))


@router.post("/{vector_store_id}/file_batches")
async def create_file_batch(request: Request, vector_store_id: str, body: FileBatchCreate) -> Response:
    """Several files into a vector store, followed as one batch."""
    return render(await _stores(request).create_batch(vector_store_id, body))


@router.get("/{vector_store_id}/file_batches/{batch_id}")
async def retrieve_file_batch(request: Request, vector_store_id: str, batch_id: str) -> Response:
    """One file batch."""
    return render(await _stores(request).batch(vector_store_id, batch_id))


@router.post("/{vector_store_id}/file_batches/{batch_id}/cancel")
async def cancel_file_batch(request: Request, vector_store_id: str, batch_id: str) -> Response:
    """Cancel what of a file batch is not yet ingested."""
    return render(await _stores(request).cancel_batch(vector_store_id, batch_id))


@router.get("/{vector_store_id}/file_batches/{batch_id}/files")
async def list_batch_files(
    request: Request,
    vector_store_id: str,
    batch_id: str,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    filter: str | None = None,
) -> Response:
    """A file batch's files."""
    page = await _stores(request).list_files(
        vector_store_id,
        batch_id=batch_id,
        status=filter,
        after=after,
        before=before,
        limit=limit,
        order=order,
    )
    return render(page)
