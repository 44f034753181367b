"""Batches: their state, the lease of the replica running one, and their results line by line."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import func, insert, or_, select, update

from modelport.store.cursor_pages import Order, Page, page
from modelport.store.database import Database
from modelport.store.tables import batch_results, batches

RUNNING = ("validating", "in_progress", "finalizing", "cancelling")
_CANCELLED = ("cancelling", "cancelled")


class BatchRows:
    """The `batches` and `batch_results` tables."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def save(self, batch: dict[str, Any], project: str) -> None:
        """Record a new batch of `project`."""
        async with self.database.transaction() as connection:
            await connection.execute(
                insert(batches).values(
                    id=batch["id"],
                    created=batch["created_at"],
                    status=batch["status"],
                    batch=batch,
                    project=project,
                )
            )

    async def get(self, batch_id: str, project: str | None) -> dict[str, Any] | None:
        """A batch as stored (its `batch` object, status, lease and project), or None; only `project`'s
        unless that is None (the runner's own reads)."""
        query = select(batches).where(batches.c.id == batch_id)
        if project is not None:
            query = query.where(batches.c.project == project)
        async with self.database.transaction() as connection:
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None

    async def put(self, batch: dict[str, Any], owner: str | None = None) -> str | None:
        """Store a batch's new state (by the replica that runs it, when `owner` is given: which also renews
        its lease), unless a cancel came first: in one conditional statement, so no runner's write can land
        between a cancel's look and its write. None when written; else the status that stood in its way
        (`cancelling` or `cancelled`: the runner learns of a cancel made on any replica)."""
        guard = [batches.c.id == batch["id"]]
        if batch["status"] not in _CANCELLED:
            guard.append(batches.c.status.not_in(_CANCELLED))  # a cancel is final
        elif batch["status"] == "cancelling":
            guard.append(batches.c.status != "cancelled")
        values: dict[str, Any] = {"status": batch["status"], "batch": batch}
        if owner is not None:
            values.update(owner=owner, heartbeat=int(time.time()))
        async with self.database.transaction() as connection:
            done = await connection.execute(update(batches).where(*guard).values(**values))
            if done.rowcount:
                return None
            status = await connection.scalar(select(batches.c.status).where(batches.c.id == batch["id"]))
        return None if status is None else str(status)

    async def cancel(self, batch_id: str, batch: dict[str, Any]) -> bool:
        """Mark a batch `cancelling` (as `batch` shows it) if it is still validating or running, in one
        conditional statement; whether it was."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(batches)
                .where(batches.c.id == batch_id, batches.c.status.in_(("validating", "in_progress")))
                .values(status="cancelling", batch=batch)
            )
        return bool(done.rowcount)

    async def list_page(self, *, project: str, after: str | None, limit: int, order: Order) -> Page:
        """A page of `project`'s batches, newest first."""
        async with self.database.transaction() as connection:
            return await page(
                connection, batches, [], project=project, after=after, limit=limit, order=order, what="batch"
            )

    async def claim(self, owner: str, stale_after: float) -> list[dict[str, Any]]:
        """Take the lease of every unfinished batch that no live replica holds; the batches taken."""
        now = int(time.time())
        free = or_(
            batches.c.owner.is_(None), batches.c.owner == owner, batches.c.heartbeat < now - stale_after
        )
        async with self.database.transaction() as connection:
            candidates = [
                row[0]
                for row in await connection.execute(
                    select(batches.c.id)
                    .where(batches.c.status.in_(RUNNING), free)
                    .order_by(batches.c.created)
                )
            ]
            taken = []
            for batch_id in candidates:
                done = await connection.execute(
                    update(batches)
                    .where(batches.c.id == batch_id, batches.c.status.in_(RUNNING), free)
                    .values(owner=owner, heartbeat=now)
                )
                if done.rowcount:
                    taken.append(batch_id)
            if not taken:
                return []
            rows = await connection.execute(select(batches).where(batches.c.id.in_(taken)))
            return [dict(row._mapping) for row in rows]

    async def add_result(self, batch_id: str, line: int, ok: bool, output: dict[str, Any]) -> None:
        """Record one line's result (in its own transaction: a restart never runs it again)."""
        async with self.database.transaction() as connection:
            await connection.execute(
                insert(batch_results).values(batch_id=batch_id, line=line, ok=ok, output=output)
            )

    async def done_lines(self, batch_id: str) -> set[int]:
        """The lines of a batch that have a result."""
        query = select(batch_results.c.line).where(batch_results.c.batch_id == batch_id)
        async with self.database.transaction() as connection:
            return {row[0] for row in await connection.execute(query)}

    async def counts(self, batch_id: str) -> tuple[int, int]:
        """Lines that succeeded and lines that failed so far."""
        query = (
            select(batch_results.c.ok, func.count())
            .where(batch_results.c.batch_id == batch_id)
            .group_by(batch_results.c.ok)
        )
        async with self.database.transaction() as connection:
            found = {bool(ok): int(n) for ok, n in await connection.execute(query)}
        return found.get(True, 0), found.get(False, 0)

    async def results(self, batch_id: str) -> list[tuple[bool, dict[str, Any]]]:
        """Every result of a batch, in the input's line order."""
        query = (
            select(batch_results.c.ok, batch_results.c.output)
            .where(batch_results.c.batch_id == batch_id)
            .order_by(batch_results.c.line)
        )
        async with self.database.transaction() as connection:
            return [(bool(ok), output) for ok, output in await connection.execute(query)]
