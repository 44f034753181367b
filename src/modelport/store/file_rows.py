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
        """Record a file."""
        async with self.database.transaction() as connection:
            await connection.execute(insert(files).values(**row))

    async def get(self, file_id: str) -> dict[str, Any] | None:
        """One file's record, or None."""
        async with self.database.transaction() as connection:
            row = (await connection.execute(select(files).where(files.c.id == file_id))).first()
        return dict(row._mapping) if row else None

    async def list_page(self, *, after: str | None, limit: int, order: Order, purpose: str | None) -> Page:
        """A page of files, newest first unless `order` is `asc`."""
        where = [files.c.purpose == purpose] if purpose else []
        async with self.database.transaction() as connection:
            return await page(connection, files, where, after=after, limit=limit, order=order, what="file")

    async def delete(self, file_id: str) -> bool:
        """Forget a file; whether it was known."""
        async with self.database.transaction() as connection:
            done = await connection.execute(delete(files).where(files.c.id == file_id))
        return bool(done.rowcount)
