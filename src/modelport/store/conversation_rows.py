"""Conversations and their items, each conversation its project's; items kept in the order they were
added and paged by it."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from modelport.errors import ConversationFullError, InvalidRequestError, NotFoundError
from modelport.store.cursor_pages import Order
from modelport.store.database import Database
from modelport.store.tables import conversation_items, conversations


class ConversationRows:
    """The `conversations` and `conversation_items` tables."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def create(self, row: dict[str, Any], items: list[dict[str, Any]]) -> None:
        """A new conversation (`row` names its project) with its first items, all or nothing."""
        try:
            async with self.database.transaction() as connection:
                await connection.execute(insert(conversations).values(**row))
                await _add(connection, row["id"], items)
        except IntegrityError:
            raise _repeated_item() from None

    async def get(self, conversation_id: str, project: str) -> dict[str, Any] | None:
        """One of `project`'s conversations, or None."""
        query = select(conversations).where(*_mine(conversation_id, project))
        async with self.database.transaction() as connection:
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None

    async def set_metadata(self, conversation_id: str, project: str, metadata: dict[str, str]) -> bool:
        """Replace a conversation's metadata; whether `project` has it."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(conversations).where(*_mine(conversation_id, project)).values(metadata=metadata)
            )
        return bool(done.rowcount)

    async def delete(self, conversation_id: str, project: str) -> bool:
        """Delete one of `project`'s conversations and its items; whether it existed."""
        async with self.database.transaction() as connection:
            done = await connection.execute(delete(conversations).where(*_mine(conversation_id, project)))
            if done.rowcount:
                await connection.execute(
                    delete(conversation_items).where(conversation_items.c.conversation_id == conversation_id)
                )
        return bool(done.rowcount)

    async def add(
        self, conversation_id: str, project: str, items: list[dict[str, Any]], most: int | None = None
    ) -> bool:
        """Append items to one of `project`'s conversations, refusing them (`ConversationFullError`) past
        `most` items in all; whether it exists."""
        try:
            async with self.database.transaction() as connection:
                # A write to the conversation's row first: it takes the row's lock (PostgreSQL) or the
                # file's (SQLite, whose reads before a write would see what another add has not yet
                # committed), so two adds sent together cannot both count room for their items.
                mine = update(conversations).where(*_mine(conversation_id, project))
                if not (await connection.execute(mine.values(id=conversations.c.id))).rowcount:
                    return False
                if most is not None:
                    counted = select(func.count()).where(
                        conversation_items.c.conversation_id == conversation_id
                    )
                    held = int(await connection.scalar(counted) or 0)
                    if held + len(items) > most:
                        raise ConversationFullError(conversation_id, held, most, "items")
                await _add(connection, conversation_id, items)
        except IntegrityError:
            raise _repeated_item() from None
        return True

    async def items(self, conversation_id: str) -> list[dict[str, Any]]:
        """Every item of a conversation, oldest first (its owner checked by the caller)."""
        query = (
            select(conversation_items.c.item)
            .where(conversation_items.c.conversation_id == conversation_id)
            .order_by(conversation_items.c.position)
        )
        async with self.database.transaction() as connection:
            return [row[0] for row in await connection.execute(query)]

    async def items_page(
        self, conversation_id: str, *, after: str | None, limit: int, order: Order
    ) -> tuple[list[dict[str, Any]], bool]:
        """A page of a conversation's items in `order`, after the item `after`; and whether more follow."""
        table = conversation_items.c
        conditions = [table.conversation_id == conversation_id]
        async with self.database.transaction() as connection:
            if after is not None:
                anchor = await connection.scalar(
                    select(table.position).where(table.conversation_id == conversation_id, table.id == after)
                )
                if anchor is None:
                    raise NotFoundError(
                        f"No item found with id '{after}' (the `after` cursor).", param="after"
                    )
                conditions.append(table.position > anchor if order == "asc" else table.position < anchor)
            sort = table.position.asc() if order == "asc" else table.position.desc()
            query = select(table.item).where(*conditions).order_by(sort).limit(limit + 1)
            rows = [row[0] for row in await connection.execute(query)]
        return rows[:limit], len(rows) > limit

    async def item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        """One item of a conversation, or None."""
        table = conversation_items.c
        query = select(table.item).where(table.conversation_id == conversation_id, table.id == item_id)
        async with self.database.transaction() as connection:
            found: dict[str, Any] | None = await connection.scalar(query)
        return found

    async def delete_item(self, conversation_id: str, item_id: str) -> bool:
        """Remove one item of a conversation; whether it was there."""
        table = conversation_items.c
        async with self.database.transaction() as connection:
            done = await connection.execute(
                delete(conversation_items).where(
                    table.conversation_id == conversation_id, table.id == item_id
                )
            )
        return bool(done.rowcount)


async def _add(connection: Any, conversation_id: str, items: list[dict[str, Any]]) -> None:
    if not items:
        return
    start = time.time_ns()
    await connection.execute(
        insert(conversation_items),
        [
            {"conversation_id": conversation_id, "position": start + i, "id": item["id"], "item": item}
            for i, item in enumerate(items)
        ],
    )


def _mine(conversation_id: str, project: str) -> tuple[Any, ...]:
    return conversations.c.id == conversation_id, conversations.c.project == project


def _repeated_item() -> InvalidRequestError:
    """Two items of one conversation with one id (given twice, or given again): nothing was added."""
    return InvalidRequestError(
        "An item id is given twice, or is already in the conversation: each item's id is its own.",
        param="items",
        code="duplicate_item_id",
    )
