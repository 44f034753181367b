"""The Responses API and Conversations: each endpoint's call into the service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelport.protocol.requests import ConversationCreate, ConversationItemsCreate, MetadataUpdate
from modelport.protocol.response_request import CompactRequest, InputTokensRequest, ResponseRequest
from modelport.service.operations import QueryItems

if TYPE_CHECKING:
    from modelport.service import Service


from modelport.service.endpoints.query import listed


async def create_response(service: Service, body: ResponseRequest) -> object:
    """A model response: whole, streamed as typed events, or queued in the background."""
    return await service.responses.create(body)


async def count_input_tokens(service: Service, body: InputTokensRequest) -> object:
    """The input tokens a `POST /v1/responses` with this body would use, counted by the model itself."""
    return await service.responses.input_tokens(body)


async def compact_response(service: Service, body: CompactRequest) -> object:
    """A long conversation shrunk into its user messages and one compaction item (the model's summary of
    the rest), for a later turn's input."""
    return await service.responses.compact(body)


async def retrieve_response(
    service: Service, response_id: str, stream: bool = False, starting_after: int | None = None
) -> object:
    """A stored response; with `stream=true`, its events (after `starting_after`)."""
    return await service.responses.retrieve(response_id, stream, starting_after)


async def delete_response(service: Service, response_id: str) -> object:
    """Delete a stored response."""
    return await service.responses.delete(response_id)


async def cancel_response(service: Service, response_id: str) -> object:
    """Cancel a background response."""
    return await service.responses.cancel(response_id)


async def list_response_input_items(
    service: Service,
    response_id: str,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> object:
    """The input items of a stored response."""
    return await service.responses.input_items(response_id, after=after, limit=limit, order=order)


async def create_conversation(service: Service, body: ConversationCreate) -> object:
    """A new conversation, with up to 20 first items."""
    return await service.responses.conversations.create(body.items, body.metadata)


async def retrieve_conversation(service: Service, conversation_id: str) -> object:
    """One conversation."""
    return await service.responses.conversations.retrieve(conversation_id)


async def update_conversation(service: Service, conversation_id: str, body: MetadataUpdate) -> object:
    """Replace a conversation's metadata."""
    return await service.responses.conversations.update(conversation_id, body.metadata)


async def delete_conversation(service: Service, conversation_id: str) -> object:
    """Delete a conversation and its items."""
    return await service.responses.conversations.delete(conversation_id)


async def list_conversation_items(
    service: Service,
    conversation_id: str,
    query: QueryItems,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> object:
    """A conversation's items, newest first unless `order=asc`."""
    return await service.responses.conversations.items(
        conversation_id, after=after, limit=limit, order=order, include=listed(query, "include")
    )


async def create_conversation_items(
    service: Service, conversation_id: str, body: ConversationItemsCreate
) -> object:
    """Append up to 20 items."""
    return await service.responses.conversations.add(conversation_id, body.items)


async def retrieve_conversation_item(service: Service, conversation_id: str, item_id: str) -> object:
    """One item of a conversation."""
    return await service.responses.conversations.item(conversation_id, item_id)


async def delete_conversation_item(service: Service, conversation_id: str, item_id: str) -> object:
    """Remove one item; the conversation."""
    return await service.responses.conversations.delete_item(conversation_id, item_id)
