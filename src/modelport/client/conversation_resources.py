"""`client.conversations` in-process: conversations and their items, with the SDK's surface and types."""

from __future__ import annotations

from typing import Any

from openai._models import construct_type
from openai.types.conversations import Conversation, ConversationDeletedResource, ConversationItem

from modelport.client.arguments import request
from modelport.client.paginators import AsyncCursorPage, AsyncPaginator
from modelport.client.sdk_errors import sdk_errors
from modelport.protocol.requests import ConversationCreate, ConversationItemsCreate, MetadataUpdate
from modelport.service import Service
from modelport.service.state.listing import ListPage


def _item(value: dict[str, Any]) -> Any:
    return construct_type(type_=ConversationItem, value=value)


class AsyncConversations:
    """`client.conversations`."""

    def __init__(self, service: Service) -> None:
        self._conversations = service.responses.conversations
        self.items = AsyncConversationItems(service)

    async def create(self, **params: Any) -> Conversation:
        """A new conversation (`items`: up to 20, `metadata`)."""
        with sdk_errors("/conversations"):
            body = request(ConversationCreate, params)
            return await self._conversations.create(body.items, body.metadata)

    async def retrieve(self, conversation_id: str, **_: Any) -> Conversation:
        """One conversation."""
        with sdk_errors(f"/conversations/{conversation_id}"):
            return await self._conversations.retrieve(conversation_id)

    async def update(self, conversation_id: str, **params: Any) -> Conversation:
        """Replace a conversation's metadata."""
        with sdk_errors(f"/conversations/{conversation_id}"):
            body = request(MetadataUpdate, params)
            return await self._conversations.update(conversation_id, body.metadata)

    async def delete(self, conversation_id: str, **_: Any) -> ConversationDeletedResource:
        """Delete a conversation and its items."""
        with sdk_errors(f"/conversations/{conversation_id}"):
            deleted = await self._conversations.delete(conversation_id)
        return ConversationDeletedResource.model_validate(deleted)


class AsyncConversationItems:
    """`client.conversations.items`."""

    def __init__(self, service: Service) -> None:
        self._conversations = service.responses.conversations

    def list(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        include: list[str] | None = None,
        **_: Any,
    ) -> AsyncPaginator[Any]:
        """A conversation's items, newest first unless `order="asc"`."""

        async def fetch(cursor: str | None) -> ListPage[Any]:
            page = await self._conversations.items(
                conversation_id, after=cursor or after, limit=limit, order=order, include=include
            )
            return ListPage([_item(item) for item in page.data], page.has_more)

        return AsyncPaginator(fetch, f"/conversations/{conversation_id}/items")

    async def create(self, conversation_id: str, **params: Any) -> AsyncCursorPage[Any]:
        """Append up to 20 items; the items as added."""
        path = f"/conversations/{conversation_id}/items"
        with sdk_errors(path):
            body = request(ConversationItemsCreate, params)
            added = await self._conversations.add(conversation_id, body.items)

        async def nothing_more(_: str | None) -> ListPage[Any]:
            return ListPage([], False)

        return AsyncCursorPage(ListPage([_item(i) for i in added.data], False), nothing_more, path)

    async def retrieve(self, item_id: str, *, conversation_id: str, **_: Any) -> Any:
        """One item of a conversation."""
        with sdk_errors(f"/conversations/{conversation_id}/items/{item_id}"):
            return _item(await self._conversations.item(conversation_id, item_id))

    async def delete(self, item_id: str, *, conversation_id: str, **_: Any) -> Conversation:
        """Remove one item; the conversation."""
        with sdk_errors(f"/conversations/{conversation_id}/items/{item_id}"):
            return await self._conversations.delete_item(conversation_id, item_id)
