"""The Conversations API (`/v1/conversations` and its items), and what `conversation` on a response reads
and appends. Each conversation is its project's; another project's is a 404."""

from __future__ import annotations

import time
from typing import Any, cast

from openai.types.conversations import Conversation, ConversationDeletedResource, ConversationItem

from modelport import context
from modelport.errors import ConversationFullError, InvalidRequestError, NotFoundError, StoreDisabledError
from modelport.ids import new_id
from modelport.protocol.answers import ListPage
from modelport.protocol.sdk_private import loosely
from modelport.service.responses import compaction
from modelport.service.responses.items import checked_items
from modelport.service.state.listing import bounded_limit, checked_order
from modelport.settings import Limits
from modelport.store import Store

_INCLUDES = ("message.output_text.logprobs",)  # what the items already hold: nothing to add


class Conversations:
    """Create, read, change and delete conversations and their items."""

    def __init__(self, store: Store | None, limits: Limits) -> None:
        self.store = store
        self.limits = limits  # read as it is now: `conversation_items`

    async def create(
        self, items: list[dict[str, Any]] | None = None, metadata: dict[str, str] | None = None
    ) -> Conversation:
        """A new conversation, with up to 20 first items."""
        row = {
            "id": new_id("conv", "_"),
            "created": int(time.time()),
            "metadata": metadata or {},
            "project": context.current().project,
        }
        await self._store().conversations.create(row, _kept(checked_items(items or [], "items")))
        return _conversation(row)

    async def retrieve(self, conversation_id: str) -> Conversation:
        """`GET /v1/conversations/{id}`."""
        return _conversation(await self._row(conversation_id))

    async def update(self, conversation_id: str, metadata: dict[str, str] | None) -> Conversation:
        """`POST /v1/conversations/{id}`: replace its metadata."""
        project = context.current().project
        if not await self._store().conversations.set_metadata(conversation_id, project, metadata or {}):
            raise _missing(conversation_id)
        return await self.retrieve(conversation_id)

    async def delete(self, conversation_id: str) -> ConversationDeletedResource:
        """`DELETE /v1/conversations/{id}`: it and its items."""
        if not await self._store().conversations.delete(conversation_id, context.current().project):
            raise _missing(conversation_id)
        return ConversationDeletedResource(id=conversation_id, object="conversation.deleted", deleted=True)

    async def items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        include: list[str] | None = None,
    ) -> ListPage[dict[str, Any]]:
        """`GET /v1/conversations/{id}/items`: newest first unless `order` is `asc`."""
        await self._row(conversation_id)
        for name in include or []:
            if name not in _INCLUDES:
                raise InvalidRequestError(
                    f"include: '{name}' is not something items can include.", param="include"
                )
        rows, more = await self._store().conversations.items_page(
            conversation_id, after=after, limit=bounded_limit(limit), order=checked_order(order, "desc")
        )
        return ListPage(rows, more)

    async def add(self, conversation_id: str, items: list[dict[str, Any]]) -> ListPage[dict[str, Any]]:
        """`POST /v1/conversations/{id}/items`: append up to 20 items; the items as added."""
        added = _kept(checked_items(items, "items"))
        project = context.current().project
        if not await self._store().conversations.add(
            conversation_id, project, added, self.limits.conversation_items
        ):
            raise _missing(conversation_id)
        return ListPage(added, False)

    async def item(self, conversation_id: str, item_id: str) -> ConversationItem:
        """`GET /v1/conversations/{id}/items/{item_id}`."""
        await self._row(conversation_id)
        found = await self._store().conversations.item(conversation_id, item_id)
        if found is None:
            raise NotFoundError(f"No item found with id '{item_id}'.", param="item_id")
        # Built as stored: the items were checked as they came in (`checked_items`).
        return cast(ConversationItem, loosely(ConversationItem, found))

    async def delete_item(self, conversation_id: str, item_id: str) -> Conversation:
        """`DELETE /v1/conversations/{id}/items/{item_id}`: the conversation, without that item."""
        row = await self._row(conversation_id)
        if not await self._store().conversations.delete_item(conversation_id, item_id):
            raise NotFoundError(f"No item found with id '{item_id}'.", param="item_id")
        return _conversation(row)

    async def history(self, conversation_id: str) -> list[dict[str, Any]]:
        """The caller's conversation as a turn reads it: its items from the latest compaction item on
        (`compaction.latest`), oldest first (a 404 naming `conversation`); a 400 naming it once it holds
        the most items it may, since the turn that reads it would add more (a turn's own items are added
        whatever their number: it has run)."""
        await self._row(conversation_id, param="conversation")
        held = await self._store().conversations.items(conversation_id)
        if len(held) >= self.limits.conversation_items:
            raise ConversationFullError(
                conversation_id, len(held), self.limits.conversation_items, "conversation"
            )
        return compaction.latest(held)

    async def append(self, conversation_id: str, project: str, items: list[dict[str, Any]]) -> None:
        """A finished turn's input and output, appended to its conversation (`project`'s); items already
        there (a client that sends earlier items again) are not added twice."""
        rows = self._store().conversations
        known = {item.get("id") for item in await rows.items(conversation_id)}
        fresh, seen = [], set()
        for item in _kept(items):
            if item.get("id") not in known and item.get("id") not in seen:
                fresh.append(item)
                seen.add(item.get("id"))
        await rows.add(conversation_id, project, fresh)

    async def _row(self, conversation_id: str, param: str = "conversation_id") -> dict[str, Any]:
        row = await self._store().conversations.get(conversation_id, context.current().project)
        if row is None:
            raise _missing(conversation_id, param)
        return row

    def _store(self) -> Store:
        if self.store is None:
            raise StoreDisabledError(
                "Conversations need the store, and this server stores nothing (--database none)."
            )
        return self.store


def _kept(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as a conversation keeps them: messages say they are complete; a `compaction_trigger`, which
    asked the turn for its compaction and says nothing itself, is not kept (the compaction item is)."""
    return [
        {**item, "status": item.get("status") or "completed"} if item.get("type") == "message" else item
        for item in items
        if item.get("type") != "compaction_trigger"
    ]


def _conversation(row: dict[str, Any]) -> Conversation:
    return Conversation.model_validate(
        {"id": row["id"], "object": "conversation", "created_at": row["created"], "metadata": row["metadata"]}
    )


def _missing(conversation_id: str, param: str = "conversation_id") -> NotFoundError:
    return NotFoundError(f"Conversation with id '{conversation_id}' not found.", param=param)
