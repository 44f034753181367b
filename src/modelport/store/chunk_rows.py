"""The chunks of vector stores: written with their file's status as a file is ingested, read back in
order, and searched by embedding (pgvector's cosine distance on PostgreSQL; an exact scan of the store's
vectors held in memory on SQLite) and by words (PostgreSQL's `tsvector`, SQLite's FTS5)."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Float, and_, bindparam, delete, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from modelport.store.database import Database
from modelport.store.tables import vector_chunk_drafts, vector_chunks, vector_store_files, vector_stores

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
    """A store's vectors in memory: each chunk's id, its file (as a number: the place of its id in
    `file_ids`), and its vector, normalised."""

    version: int
    ids: np.ndarray
    files: np.ndarray
    file_ids: list[str]
    matrix: np.ndarray


class ChunkRows:
    """The `vector_chunks` table (and its full-text index)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._held: OrderedDict[str, _Held] = OrderedDict()

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

    async def draft(
        self, store_id: str, file_id: str, start: int, chunks: list[tuple[str, np.ndarray]]
    ) -> bool:
        """Keep chunks of a file being ingested (from position `start`) as they are embedded, unless it is no
        longer in progress (cancelled, taken out) or another replica kept these places first (one took the
        file up from this one, which had only stalled): then False, and nothing is kept."""
        files = vector_store_files.c
        try:
            async with self.database.transaction() as connection:
                # The check is a write (a heartbeat: the file is being worked on), so it holds the file's row
                # (PostgreSQL) or the database (SQLite, where a read before the first write is outside the
                # transaction) until the drafts are in: a cancel cannot land between the two.
                alive = await connection.execute(
                    update(vector_store_files)
                    .where(
                        files.vector_store_id == store_id, files.id == file_id, files.status == "in_progress"
                    )
                    .values(heartbeat=int(time.time()))
                )
                if not alive.rowcount:
                    return False
                await connection.execute(
                    insert(vector_chunk_drafts),
                    [
                        {
                            "vector_store_id": store_id,
                            "file_id": file_id,
                            "position": start + i,
                            "text": chunk,
                            "embedding": np.asarray(vector, dtype="<f4").tobytes(),
                        }
                        for i, (chunk, vector) in enumerate(chunks)
                    ],
                )
        except IntegrityError:
            return False
        return True

    async def drafted(self, store_id: str, file_id: str, pieces: list[str]) -> list[np.ndarray]:
        """The vectors kept for the first of `pieces` by an ingest of this file that stopped; none (and the
        drafts dropped) if what was kept is not how the file is cut now."""
        table = vector_chunk_drafts.c
        query = (
            select(table.text, table.embedding)
            .where(table.vector_store_id == store_id, table.file_id == file_id)
            .order_by(table.position)
        )
        async with self.database.transaction() as connection:
            rows = list(await connection.execute(query))
            if [row[0] for row in rows] == pieces[: len(rows)]:
                return [np.frombuffer(row[1], dtype="<f4") for row in rows]
            await _drop_drafts(connection, store_id, file_id)
        return []

    async def complete(
        self, store_id: str, file_id: str, chunks: list[tuple[str, np.ndarray]], usage_bytes: int
    ) -> bool:
        """A file's chunks, in place of any it had (its drafts dropped), and its status `completed`, all at
        once: unless it was cancelled or taken out meanwhile (then nothing is written, and False)."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(vector_store_files)
                .where(
                    vector_store_files.c.vector_store_id == store_id,
                    vector_store_files.c.id == file_id,
                    vector_store_files.c.status == "in_progress",
                )
                .values(status="completed", usage_bytes=usage_bytes, last_error=None)
            )
            if not done.rowcount:
                return False
            await drop_chunks(connection, store_id, file_id)
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
            wanted = set(file_ids)
            allowed = [number for number, name in enumerate(held.file_ids) if name in wanted]
            scores = np.where(np.isin(held.files, allowed), scores, -np.inf)
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
                file_ids, files = np.unique([row[1] for row in rows], return_inverse=True)
                held = _Held(
                    int(version or 0),
                    np.array([row[0] for row in rows], dtype=np.int64),
                    files,
                    [str(name) for name in file_ids],
                    matrix / np.clip(norms, 1e-12, None),
                )
                self._held[store_id] = held
        self._held.move_to_end(store_id)
        while len(self._held) > _HELD_STORES:
            self._held.popitem(last=False)
        return held


async def _drop_drafts(connection: Any, store_id: str, file_id: str) -> None:
    table = vector_chunk_drafts.c
    await connection.execute(
        delete(vector_chunk_drafts).where(table.vector_store_id == store_id, table.file_id == file_id)
    )


async def drop_chunks(connection: Any, store_id: str, file_id: str) -> None:
    """Delete a file's chunks (and its drafts) and move the store's version on (its held vectors are
    stale)."""
    await _drop_drafts(connection, store_id, file_id)
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


def _unit(vector: np.ndarray) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float32)
    result: np.ndarray = vector / max(float(np.linalg.norm(vector)), 1e-12)
    return result
