"""Vector stores, their files (their status, attributes and the replica working on them) and file batches.
Their chunks are `chunk_rows`'."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from modelport.store.chunk_rows import drop_chunks
from modelport.store.cursor_pages import Order, Page, page
from modelport.store.database import Database
from modelport.store.tables import vector_chunks, vector_store_file_batches, vector_store_files, vector_stores


class VectorRows:
    """The vector store tables."""

    def __init__(self, database: Database) -> None:
        self.database = database

    # Stores.

    async def create(self, row: dict[str, Any]) -> None:
        """A new store (`row` names its project)."""
        async with self.database.transaction() as connection:
            await connection.execute(insert(vector_stores).values(**row))

    async def get(self, store_id: str, project: str) -> dict[str, Any] | None:
        """One of `project`'s stores, or None."""
        query = select(vector_stores).where(
            vector_stores.c.id == store_id, vector_stores.c.project == project
        )
        async with self.database.transaction() as connection:
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None

    async def stores_page(
        self, *, project: str, after: str | None, before: str | None, limit: int, order: Order
    ) -> Page:
        """A page of `project`'s stores."""
        async with self.database.transaction() as connection:
            return await page(
                connection,
                vector_stores,
                [],
                project=project,
                after=after,
                before=before,
                limit=limit,
                order=order,
                what="vector store",
            )

    async def change(self, store_id: str, project: str, values: dict[str, Any]) -> bool:
        """Set some of a store's columns; whether `project` has it."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(vector_stores)
                .where(vector_stores.c.id == store_id, vector_stores.c.project == project)
                .values(**values)
            )
        return bool(done.rowcount)

    async def delete(self, store_id: str, project: str) -> bool:
        """Delete one of `project`'s stores with its files, batches and chunks; whether it existed."""
        async with self.database.transaction() as connection:
            found = await connection.scalar(
                select(func.count())
                .select_from(vector_stores)
                .where(vector_stores.c.id == store_id, vector_stores.c.project == project)
            )
            if not found:
                return False
            for table in (vector_chunks, vector_store_files, vector_store_file_batches):
                await connection.execute(delete(table).where(table.c.vector_store_id == store_id))
            await connection.execute(delete(vector_stores).where(vector_stores.c.id == store_id))
        return True

    async def counts(self, store_ids: list[str], batch_id: str | None = None) -> dict[str, dict[str, int]]:
        """Per store (or for one batch's files): how many files are in each status, and `usage_bytes`."""
        table = vector_store_files.c
        query = (
            select(
                table.vector_store_id,
                table.status,
                func.count(),
                func.coalesce(func.sum(table.usage_bytes), 0),
            )
            .where(table.vector_store_id.in_(store_ids))
            .group_by(table.vector_store_id, table.status)
        )
        if batch_id is not None:
            query = query.where(table.batch_id == batch_id)
        counted: dict[str, dict[str, int]] = {store: {"usage_bytes": 0} for store in store_ids}
        async with self.database.transaction() as connection:
            for store, status, count, used in await connection.execute(query):
                counted[store][status] = int(count)
                counted[store]["usage_bytes"] += int(used)
        return counted

    # Files.

    async def attach(
        self, rows: list[dict[str, Any]], batch: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Put files into a store, with the batch that brings them; those it put in (a file already there
        stays as it is: each insert skips one that is, in one statement, so attaches sent together put a
        file in once)."""
        dialect = sqlite if self.database.sqlite else postgresql
        added = []
        async with self.database.transaction() as connection:
            if batch is not None:
                await connection.execute(insert(vector_store_file_batches).values(**batch))
            for row in rows:
                put = dialect.insert(vector_store_files).values(**row).on_conflict_do_nothing()
                if (await connection.execute(put)).rowcount:
                    added.append(row)
        return added

    async def file(self, store_id: str, file_id: str) -> dict[str, Any] | None:
        """A file of a store, or None."""
        async with self.database.transaction() as connection:
            row = (
                await connection.execute(select(vector_store_files).where(*_file(store_id, file_id)))
            ).first()
        return dict(row._mapping) if row else None

    async def files(self, store_id: str) -> list[dict[str, Any]]:
        """Every file of a store (what a search filters on its attributes)."""
        query = select(vector_store_files).where(vector_store_files.c.vector_store_id == store_id)
        async with self.database.transaction() as connection:
            return [dict(row._mapping) for row in await connection.execute(query)]

    async def files_page(
        self,
        store_id: str,
        *,
        project: str,
        status: str | None,
        batch_id: str | None,
        after: str | None,
        before: str | None,
        limit: int,
        order: Order,
    ) -> Page:
        """A page of a store's files (those of one batch, in one status)."""
        table = vector_store_files.c
        where = [table.vector_store_id == store_id]
        if status is not None:
            where.append(table.status == status)
        if batch_id is not None:
            where.append(table.batch_id == batch_id)
        async with self.database.transaction() as connection:
            return await page(
                connection,
                vector_store_files,
                where,
                project=project,
                after=after,
                before=before,
                limit=limit,
                order=order,
                what="vector store file",
            )

    async def set_attributes(self, store_id: str, file_id: str, attributes: dict[str, Any]) -> bool:
        """Replace a file's attributes; whether it is in the store."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(vector_store_files).where(*_file(store_id, file_id)).values(attributes=attributes)
            )
        return bool(done.rowcount)

    async def detach(self, store_id: str, file_id: str) -> bool:
        """Take a file and its chunks out of a store; whether it was there."""
        async with self.database.transaction() as connection:
            done = await connection.execute(delete(vector_store_files).where(*_file(store_id, file_id)))
            if done.rowcount:
                await drop_chunks(connection, store_id, file_id)
        return bool(done.rowcount)

    async def claim(self, store_id: str, file_id: str, lease: float) -> bool:
        """Take a file in progress to work on, unless another replica's heartbeat on it is fresh."""
        now = int(time.time())
        table = vector_store_files.c
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(vector_store_files)
                .where(
                    *_file(store_id, file_id),
                    table.status == "in_progress",
                    (table.heartbeat.is_(None)) | (table.heartbeat < now - lease),
                )
                .values(heartbeat=now)
            )
        return bool(done.rowcount)

    async def beat(self, store_id: str, file_id: str) -> None:
        """This replica is still working on the file."""
        async with self.database.transaction() as connection:
            await connection.execute(
                update(vector_store_files).where(*_file(store_id, file_id)).values(heartbeat=int(time.time()))
            )

    async def abandoned(self, lease: float) -> list[dict[str, Any]]:
        """Files in progress that no replica has worked on within `lease` seconds (a replica stopped)."""
        table = vector_store_files.c
        query = select(table.vector_store_id, table.id, table.project).where(
            table.status == "in_progress",
            (table.heartbeat.is_(None)) | (table.heartbeat < time.time() - lease),
        )
        async with self.database.transaction() as connection:
            return [dict(row._mapping) for row in await connection.execute(query)]

    async def fail(self, store_id: str, file_id: str, code: str, message: str) -> None:
        """Mark a file in progress `failed`, with why."""
        async with self.database.transaction() as connection:
            await connection.execute(
                update(vector_store_files)
                .where(*_file(store_id, file_id), vector_store_files.c.status == "in_progress")
                .values(status="failed", last_error={"code": code, "message": message[:1000]})
            )

    # File batches.

    async def batch(self, batch_id: str, store_id: str, project: str) -> dict[str, Any] | None:
        """One of `project`'s file batches of a store, or None."""
        table = vector_store_file_batches.c
        query = select(vector_store_file_batches).where(
            table.id == batch_id, table.vector_store_id == store_id, table.project == project
        )
        async with self.database.transaction() as connection:
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None

    async def cancel_batch(self, batch_id: str) -> None:
        """Cancel a batch: its files still in progress are cancelled, those done stay."""
        async with self.database.transaction() as connection:
            await connection.execute(
                update(vector_store_file_batches)
                .where(
                    vector_store_file_batches.c.id == batch_id,
                    vector_store_file_batches.c.status == "in_progress",
                )
                .values(status="cancelled")
            )
            await connection.execute(
                update(vector_store_files)
                .where(
                    vector_store_files.c.batch_id == batch_id, vector_store_files.c.status == "in_progress"
                )
                .values(status="cancelled")
            )


def _file(store_id: str, file_id: str) -> tuple[Any, ...]:
    return vector_store_files.c.vector_store_id == store_id, vector_store_files.c.id == file_id
