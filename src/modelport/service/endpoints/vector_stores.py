"""Vector stores, their files and file batches: each endpoint's call into the service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelport.protocol.vector_requests import (
    FileBatchCreate,
    VectorStoreCreate,
    VectorStoreFileCreate,
    VectorStoreFileUpdate,
    VectorStoreSearch,
    VectorStoreUpdate,
)

if TYPE_CHECKING:
    from modelport.service import Service


async def create_vector_store(service: Service, body: VectorStoreCreate) -> object:
    """A new vector store; its files are ingested in the background."""
    return await service.vector_stores.create(body)


async def list_vector_stores(
    service: Service,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> object:
    """The caller's vector stores, newest first unless `order=asc`."""
    return await service.vector_stores.list_stores(after=after, before=before, limit=limit, order=order)


async def retrieve_vector_store(service: Service, vector_store_id: str) -> object:
    """One vector store."""
    return await service.vector_stores.retrieve(vector_store_id)


async def update_vector_store(service: Service, vector_store_id: str, body: VectorStoreUpdate) -> object:
    """Change a vector store's name, metadata or expiry."""
    return await service.vector_stores.update(vector_store_id, body)


async def delete_vector_store(service: Service, vector_store_id: str) -> object:
    """Delete a vector store (its files stay in the Files API)."""
    return await service.vector_stores.delete(vector_store_id)


async def search_vector_store(service: Service, vector_store_id: str, body: VectorStoreSearch) -> object:
    """Hybrid search of a vector store."""
    return await service.vector_stores.search(vector_store_id, body)


async def create_vector_store_file(
    service: Service, vector_store_id: str, body: VectorStoreFileCreate
) -> object:
    """Put a file into a vector store."""
    return await service.vector_stores.attach(
        vector_store_id, body.file_id, body.attributes, body.chunking_strategy
    )


async def list_vector_store_files(
    service: Service,
    vector_store_id: str,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    filter: str | None = None,
) -> object:
    """A vector store's files, by status with `filter`."""
    return await service.vector_stores.list_files(
        vector_store_id, status=filter, after=after, before=before, limit=limit, order=order
    )


async def retrieve_vector_store_file(service: Service, vector_store_id: str, file_id: str) -> object:
    """One file of a vector store."""
    return await service.vector_stores.file(vector_store_id, file_id)


async def update_vector_store_file(
    service: Service, vector_store_id: str, file_id: str, body: VectorStoreFileUpdate
) -> object:
    """Replace a file's attributes."""
    return await service.vector_stores.update_file(vector_store_id, file_id, body.attributes)


async def delete_vector_store_file(service: Service, vector_store_id: str, file_id: str) -> object:
    """Take a file out of a vector store."""
    return await service.vector_stores.detach(vector_store_id, file_id)


async def retrieve_vector_store_file_content(service: Service, vector_store_id: str, file_id: str) -> object:
    """A file's chunks, as the store holds them."""
    return await service.vector_stores.file_content(vector_store_id, file_id)


async def create_file_batch(service: Service, vector_store_id: str, body: FileBatchCreate) -> object:
    """Several files into a vector store, followed as one batch."""
    return await service.vector_stores.create_batch(vector_store_id, body)


async def retrieve_file_batch(service: Service, vector_store_id: str, batch_id: str) -> object:
    """One file batch."""
    return await service.vector_stores.batch(vector_store_id, batch_id)


async def cancel_file_batch(service: Service, vector_store_id: str, batch_id: str) -> object:
    """Cancel what of a file batch is not yet ingested."""
    return await service.vector_stores.cancel_batch(vector_store_id, batch_id)


async def list_file_batch_files(
    service: Service,
    vector_store_id: str,
    batch_id: str,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    filter: str | None = None,
) -> object:
    """A file batch's files."""
    return await service.vector_stores.list_files(
        vector_store_id,
        batch_id=batch_id,
        status=filter,
        after=after,
        before=before,
        limit=limit,
        order=order,
    )
