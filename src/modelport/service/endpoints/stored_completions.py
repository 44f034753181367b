"""Stored chat completions: each endpoint's call into the service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelport.protocol.requests import MetadataUpdate
from modelport.service.operations import QueryItems

if TYPE_CHECKING:
    from modelport.service import Service


from modelport.service.endpoints.query import filtered


async def list_chat_completions(
    service: Service,
    query: QueryItems,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    model: str | None = None,
) -> object:
    """Stored chat completions, oldest first; `metadata[key]=value` filters."""
    metadata = filtered(query, "metadata")
    return await service.stored.list(after=after, limit=limit, order=order, model=model, metadata=metadata)


async def retrieve_chat_completion(service: Service, completion_id: str) -> object:
    """A stored chat completion, with its metadata and input messages."""
    return await service.stored.retrieve(completion_id)


async def list_chat_completion_messages(
    service: Service,
    completion_id: str,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> object:
    """The messages of a stored chat completion's request."""
    return await service.stored.messages(completion_id, after=after, limit=limit, order=order)


async def update_chat_completion(service: Service, completion_id: str, body: MetadataUpdate) -> object:
    """Replace a stored chat completion's metadata."""
    return await service.stored.update(completion_id, body.metadata)


async def delete_chat_completion(service: Service, completion_id: str) -> object:
    """Delete a stored chat completion."""
    return await service.stored.delete(completion_id)
