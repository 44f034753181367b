"""The Conversations API: conversations and their items. Parse, call the service, render the answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from modelport.protocol.requests import ConversationCreate, ConversationItemsCreate, MetadataUpdate
from modelport.server.http_render import json_body, render
from modelport.server.routes import service_of

router = APIRouter(prefix="/conversations")


@router.post("")
async def create_conversation(request: Request, body: ConversationCreate) -> Response:
    """A new conversation, with up to 20 first items."""
    return render(await service_of(request).responses.conversations.create(body.items, body.metadata))


@router.get("/{conversation_id}")
async def retrieve_conversation(request: Request, conversation_id: str) -> Response:
    """One conversation."""
    return render(await service_of(request).responses.conversations.retrieve(conversation_id))


@router.post("/{conversation_id}")
async def update_conversation(request: Request, conversation_id: str, body: MetadataUpdate) -> Response:
    """Replace a conversation's metadata."""
    return render(await service_of(request).responses.conversations.update(conversation_id, body.metadata))


@router.delete("/{conversation_id}")
async def delete_conversation(request: Request, conversation_id: str) -> Response:
    """Delete a conversation and its items."""
    return json_body(await service_of(request).responses.conversations.delete(conversation_id))


@router.get("/{conversation_id}/items")
async def list_items(
    request: Request,
    conversation_id: str,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    include: Annotated[list[str] | None, Query()] = None,
) -> Response:
    """A conversation's items, newest first unless `order=asc`."""
    included = (include or []) + request.query_params.getlist("include[]")
    page = await service_of(request).responses.conversations.items(
        conversation_id, after=after, limit=limit, order=order, include=included
    )
    return render(page)


@router.post("/{conversation_id}/items")
async def add_items(request: Request, conversation_id: str, body: ConversationItemsCreate) -> Response:
    """Append up to 20 items."""
    return render(await service_of(request).responses.conversations.add(conversation_id, body.items))


@router.get("/{conversation_id}/items/{item_id}")
async def retrieve_item(request: Request, conversation_id: str, item_id: str) -> Response:
    """One item of a conversation."""
    return json_body(await service_of(request).responses.conversations.item(conversation_id, item_id))


@router.delete("/{conversation_id}/items/{item_id}")
async def delete_item(request: Request, conversation_id: str, item_id: str) -> Response:
    """Remove one item; the conversation."""
    return render(await service_of(request).responses.conversations.delete_item(conversation_id, item_id))
