"""Vector stores, their files and file batches, and their chunks: written as files are ingested, searched
by embedding (pgvector's cosine distance on PostgreSQL; an exact scan of the store's vectors held in memory
on SQLite) and by words (PostgreSQL's `tsvector`, SQLite's FTS5)."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Float, and_, bindparam, delete, func, insert, select, text, update

from modelport.store.cursor_pages import Order, Page, page
from modelport.store.database import Database
from modelport.store.tables import vector_chunks, vector_store_file_batches, vector_store_files, vector_stores

_HELD_STORES = 8  # stores whose vectors SQLite searches keep in memory, the most recently used


@dataclass(frozen=True)
class Hit:
    """A chunk found: its file, place in the file, text, and cosine similarity to the query."""

    id: int
    file_id: str
    position: int
    text: str
    similarity: float


@dataclass(frozen=True)
class _Held:
    version: int
    ids: np.ndarray
    files: np.ndarray
    matrix: np.ndarray  # rows normalised


class VectorRows:
    """The vector store tables."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._held: OrderedDict[str, _Held] = OrderedDict()

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
        self._held.pop(store_id, None)
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

    async def attach(self, rows: list[dict[str, Any]], batch: dict[str, Any] | None = None) -> None:
        """Put files into a store (a file already there stays as it is), with the batch that brings them."""
        async with self.database.transaction() as connection:
            if batch is not None:
                await connection.execute(insert(vector_store_file_batches).values(**batch))
            for row in rows:
                there = await connection.scalar(
                    select(func.count())
                    .select_from(vector_store_files)
                    .where(*_file(row["vector_store_id"], row["id"]))
                )
                if not there:
                    await connection.execute(insert(vector_store_files).values(**row))

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

    async def texts(self, store_id: str, file_id: str) -> list[str]:
        """A file's chunks' text, in order."""
        table = vector_chunks.c
        query = (
            select(table.text)
            .where(table.vector_store_id == store_id, table.file_id == file_id)
            .order_by(table.position)
        )
        async with self.database.transaction() as connection:
            return [row[0] for row in await connection.execute(query)]

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
                await _drop_chunks(connection, store_id, file_id)
        return bool(done.rowcount)

    async def claim(self, store_id: str, file_id: str, lease: int) -> bool:
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

    async def abandoned(self, lease: int) -> list[dict[str, Any]]:
        """Files in progress that no replica has worked on within `lease` seconds (a replica stopped)."""
        table = vector_store_files.c
        query = select(table.vector_store_id, table.id, table.project).where(
            table.status == "in_progress",
            (table.heartbeat.is_(None)) | (table.heartbeat < time.time() - lease),
        )
        async with self.database.transaction() as connection:
            return [dict(row._mapping) for row in await connection.execute(query)]

    async def complete(
        self, store_id: str, file_id: str, chunks: list[tuple[str, np.ndarray]], usage_bytes: int
    ) -> bool:
        """A file's chunks, in place of any it had, and its status `completed`, all at once: unless it was
        cancelled or taken out meanwhile (then nothing is written, and False)."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(vector_store_files)
                .where(*_file(store_id, file_id), vector_store_files.c.status == "in_progress")
                .values(status="completed", usage_bytes=usage_bytes, last_error=None)
            )
            if not done.rowcount:
                return False
            await _drop_chunks(connection, store_id, file_id)
            if chunks:
                await connection.execute(
                    insert(vector_chunks),
                    [
                        {
                            "vector_store_id": store_id,
                            "file_id": file_id,
                            "position": i,
                            "text": chunk,
                            "embedding": vector,
                        }
                        for i, (chunk, vector) in enumerate(chunks)
                    ],
                )
        return True

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

    # Search.

    async def nearest(
        self, store_id: str, vector: np.ndarray, file_ids: list[str] | None, k: int
    ) -> list[tuple[int, float]]:
        """The `k` chunks closest to `vector` (of the files `file_ids`, when given), with their similarity."""
        if file_ids is not None and not file_ids:
            return []
        if not self.database.sqlite:
            distance = vector_chunks.c.embedding.op("<=>", return_type=Float)(vector)
            query = (
                select(vector_chunks.c.id, (1 - distance).label("similarity"))
                .where(vector_chunks.c.vector_store_id == store_id)
                .order_by(distance)
                .limit(k)
            )
            if file_ids is not None:
                query = query.where(vector_chunks.c.file_id.in_(file_ids))
            async with self.database.transaction() as connection:
                return [(int(i), float(s)) for i, s in await connection.execute(query)]
        held = await self._hold(store_id)
        if not len(held.ids):
            return []
        scores = held.matrix @ _unit(vector)
        if file_ids is not None:
            scores = np.where(np.isin(held.files, file_ids), scores, -np.inf)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [(int(held.ids[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]

    async def matching(
        self, store_id: str, words: list[str], file_ids: list[str] | None, k: int
    ) -> list[int]:
        """The `k` chunks that best match any of `words` by full-text rank (of the files `file_ids`)."""
        if not words or (file_ids is not None and not file_ids):
            return []
        if self.database.sqlite:
            fts = "vector_chunks_fts"
            files = f"JOIN vector_chunks c ON c.id = {fts}.rowid AND c.file_id IN :files" if file_ids else ""
            sql = (
                f"SELECT {fts}.rowid FROM {fts} {files} WHERE {fts} MATCH :query ORDER BY {fts}.rank LIMIT :k"
            )
            wanted = " OR ".join(f'"{word}"' for word in words)
            query = f'vector_store_id : "{store_id}" AND ({wanted})'
        else:
            files = "AND c.file_id IN :files" if file_ids is not None else ""
            sql = (
                "SELECT c.id FROM vector_chunks c, to_tsquery('english', :query) q "
                f"WHERE c.words @@ q AND c.vector_store_id = :store {files} "
                "ORDER BY ts_rank(c.words, q) DESC LIMIT :k"
            )
            query = " | ".join(words)
        statement = text(sql)
        values: dict[str, Any] = {"query": query, "store": store_id, "k": k}
        if file_ids is not None:
            statement = statement.bindparams(bindparam("files", expanding=True))
            values["files"] = file_ids
        async with self.database.transaction() as connection:
            return [int(row[0]) for row in await connection.execute(statement, values)]

    async def chunks(self, store_id: str, ids: list[int], vector: np.ndarray) -> dict[int, Hit]:
        """Chunks of a store by id, each with its similarity to `vector`."""
        if not ids:
            return {}
        table = vector_chunks.c
        query = select(table.id, table.file_id, table.position, table.text, table.embedding).where(
            table.vector_store_id == store_id, table.id.in_(ids)
        )
        unit = _unit(vector)
        async with self.database.transaction() as connection:
            rows = list(await connection.execute(query))
        return {
            int(i): Hit(int(i), file_id, int(position), chunk, float(_unit(embedding) @ unit))
            for i, file_id, position, chunk, embedding in rows
        }

    async def _hold(self, store_id: str) -> _Held:
        """The store's vectors in memory, read again when its version has moved on."""
        async with self.database.transaction() as connection:
            version = await connection.scalar(
                select(vector_stores.c.version).where(vector_stores.c.id == store_id)
            )
            held = self._held.get(store_id)
            if held is None or held.version != version:
                table = vector_chunks.c
                rows = list(
                    await connection.execute(
                        select(table.id, table.file_id, table.embedding).where(
                            table.vector_store_id == store_id
                        )
                    )
                )
                matrix = np.stack([row[2] for row in rows]) if rows else np.zeros((0, 1), np.float32)
                norms = np.linalg.norm(matrix, axis=1, keepdims=True)
                held = _Held(
                    int(version or 0),
                    np.array([row[0] for row in rows], dtype=np.int64),
                    np.array([row[1] for row in rows], dtype=object),
                    matrix / np.clip(norms, 1e-12, None),
                )
                self._held[store_id] = held
        self._held.move_to_end(store_id)
        while len(self._held) > _HELD_STORES:
            self._held.popitem(last=False)
        return held


async def _drop_chunks(connection: Any, store_id: str, file_id: str) -> None:
    """Delete a file's chunks and move the store's version on (its held vectors are stale)."""
    await connection.execute(
        delete(vector_chunks).where(
            and_(vector_chunks.c.vector_store_id == store_id, vector_chunks.c.file_id == file_id)
        )
    )
    await connection.execute(
        update(vector_stores)
        .where(vector_stores.c.id == store_id)
        .values(version=vector_stores.c.version + 1)
    )


def _file(store_id: str, file_id: str) -> tuple[Any, ...]:
    return vector_store_files.c.vector_store_id == store_id, vector_store_files.c.id == file_id


def _unit(vector: np.ndarray) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float32)
    result: np.ndarray = vector / max(float(np.linalg.norm(vector)), 1e-12)
    return result
