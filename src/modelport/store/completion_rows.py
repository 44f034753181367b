"""Stored chat completions: saved whole in one transaction, listed by cursor, filtered by model and
metadata, their metadata updated, deleted."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, delete, insert, select, update

from modelport.store.cursor_pages import Order, Page, page
from modelport.store.database import Database
from modelport.store.tables import chat_completion_metadata, chat_completions


class CompletionRows:
    """The `chat_completions` table and its metadata index."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def save(
        self,
        completion: dict[str, Any],
        request: dict[str, Any],
        metadata: dict[str, str],
        status: str,
        project: str,
    ) -> None:
        """Store a completion of `project`, its request and metadata, all or nothing."""
        async with self.database.transaction() as connection:
            await connection.execute(
                insert(chat_completions).values(
                    id=completion["id"],
                    created=int(completion.get("created") or 0),
                    model=str(completion.get("model") or ""),
                    status=status,
                    metadata=metadata,
                    request=request,
                    completion=completion,
                    project=project,
                )
            )
            if metadata:
                await connection.execute(
                    insert(chat_completion_metadata),
                    [{"completion_id": completion["id"], "key": k, "value": v} for k, v in metadata.items()],
                )

    async def get(self, completion_id: str, project: str) -> dict[str, Any] | None:
        """The row of one of `project`'s completions, or None."""
        async with self.database.transaction() as connection:
            row = (
                await connection.execute(select(chat_completions).where(*_mine(completion_id, project)))
            ).first()
        return dict(row._mapping) if row else None

    async def list_page(
        self,
        *,
        project: str,
        after: str | None,
        limit: int,
        order: Order,
        model: str | None,
        metadata: dict[str, str],
    ) -> Page:
        """A page of completions, oldest first (`asc`) or newest first."""
        where = [chat_completions.c.model == model] if model else []
        tagged = chat_completion_metadata.c
        for key, value in metadata.items():
            # The ids come from the metadata index: a per-row EXISTS walks the table in date order on SQLite
            # until enough rows match, which for a rare tag is most of it.
            matching = select(tagged.completion_id).where(tagged.key == key, tagged.value == value)
            where.append(chat_completions.c.id.in_(matching))
        async with self.database.transaction() as connection:
            return await page(
                connection,
                chat_completions,
                where,
                project=project,
                after=after,
                limit=limit,
                order=order,
                what="chat completion",
            )

    async def set_metadata(self, completion_id: str, project: str, metadata: dict[str, str]) -> bool:
        """Replace a completion's metadata; whether `project` has it."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(chat_completions).where(*_mine(completion_id, project)).values(metadata=metadata)
            )
            if not done.rowcount:
                return False
            await connection.execute(
                delete(chat_completion_metadata).where(
                    chat_completion_metadata.c.completion_id == completion_id
                )
            )
            if metadata:
                await connection.execute(
                    insert(chat_completion_metadata),
                    [{"completion_id": completion_id, "key": k, "value": v} for k, v in metadata.items()],
                )
        return True

    async def delete(self, completion_id: str, project: str) -> bool:
        """Delete one of `project`'s completions (its metadata goes with it); whether it existed."""
        async with self.database.transaction() as connection:
            done = await connection.execute(delete(chat_completions).where(*_mine(completion_id, project)))
            if not done.rowcount:
                return False
            await connection.execute(
                delete(chat_completion_metadata).where(
                    chat_completion_metadata.c.completion_id == completion_id
                )
            )
        return True


def _mine(completion_id: str, project: str) -> tuple[ColumnElement[bool], ...]:
    return chat_completions.c.id == completion_id, chat_completions.c.project == project
