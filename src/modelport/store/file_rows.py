"""Uploaded files' records (their bytes are on disk, kept by the service)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, select

from modelport.store.cursor_pages import Order, Page, page
from modelport.store.database import Database
from modelport.store.tables import files


class FileRows:
    """The `files` table."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def save(self, row: dict[str, Any]) -> None:
        """Record a file (`row` names its project)."""
        async with self.database.transaction() as connection:
            await connection.execute(insert(files).values(**row))

    async def get(self, file_id: str, project: str) -> dict[str, Any] | None:
        """One of `project`'s files' record, or None."""
        async with self.database.transaction() as connection:
            query = select(files).where(files.c.id == file_id, files.c.project == project)
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None

    async def names(self, file_ids: list[str], project: str) -> dict[str, str]:
        """The names of those of `file_ids` that are `project`'s."""
        query = select(files.c.id, files.c.filename).where(
            files.c.id.in_(file_ids), files.c.project == project
        )
        async with self.database.transaction() as connection:
            return {file_id: name for file_id, name in await connection.execute(query)}

    async def list_page(
        self, *, project: str, after: str | None, limit: int, order: Order, purpose: str | None
    ) -> Page:
        """A page of `project`'s files, newest first unless `order` is `asc`."""
        where = [files.c.purpose == purpose] if purpose else []
        async with self.database.transaction() as connection:
            return await page(
                connection, files, where, project=project, after=after, limit=limit, order=order, what="file"
            )

    async def delete(self, file_id: str, project: str) -> bool:
        """Forget one of `project`'s files; whether it was known."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                delete(files).where(files.c.id == file_id, files.c.project == project)
            )
        return bool(done.rowcount)
