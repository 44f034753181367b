"""Stored responses: one row per turn, chained by `previous_response_id` (read back in one recursive
query), and the events of background responses for clients that resume their stream."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Integer, delete, insert, literal, select, update
from sqlalchemy.dialects import postgresql, sqlite

from modelport.store.database import Database
from modelport.store.tables import response_events, response_items, responses

ID_CHARS = 128  # the longest item id indexed (the column's width; a client's are held to it)
_MAX_CHAIN = 100_000  # turns one conversation may have: bounds the recursive query whatever is stored
UNFINISHED = ("queued", "in_progress")


class ResponseRows:
    """The `responses`, `response_items` and `response_events` tables."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def save(self, row: dict[str, Any]) -> None:
        """Insert a response (its id is new; `row` names its project), and its items by their ids."""
        async with self.database.transaction() as connection:
            await connection.execute(insert(responses).values(**row))
            given, made = row["input_items"], row["response"].get("output", [])
            await self._index(connection, row["id"], [*given, *made])

    async def with_item(self, item_id: str, project: str) -> dict[str, Any] | None:
        """The latest of `project`'s responses that holds an item by this id (in its input or output)."""
        query = (
            select(responses)
            .join(response_items, response_items.c.response_id == responses.c.id)
            .where(response_items.c.item_id == item_id, responses.c.project == project)
            .order_by(responses.c.created.desc(), responses.c.id.desc())
            .limit(1)
        )
        async with self.database.transaction() as connection:
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None

    async def update(self, response_id: str, **values: Any) -> None:
        """Change a stored response (its status, its `response` object, its heartbeat)."""
        async with self.database.transaction() as connection:
            await connection.execute(update(responses).where(responses.c.id == response_id).values(**values))

    async def get(self, response_id: str, project: str | None) -> dict[str, Any] | None:
        """One row, or None; only `project`'s unless that is None (a background job's own reads)."""
        query = select(responses).where(responses.c.id == response_id)
        if project is not None:
            query = query.where(responses.c.project == project)
        async with self.database.transaction() as connection:
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None

    async def chain(self, response_id: str, project: str) -> list[dict[str, Any]]:
        """One of `project`'s responses and every earlier turn of its conversation, oldest first; empty if
        it has none by that id. A chain whose oldest row still names a previous response lost that one
        (deleted). (A turn only ever names a previous one of its own project.)"""
        walk = (
            select(responses.c.id, responses.c.previous_response_id, literal(0, Integer).label("depth"))
            .where(responses.c.id == response_id, responses.c.project == project)
            .cte("walk", recursive=True)
        )
        earlier = responses.alias("earlier")
        walk = walk.union_all(
            select(earlier.c.id, earlier.c.previous_response_id, walk.c.depth + 1).where(
                earlier.c.id == walk.c.previous_response_id, walk.c.depth < _MAX_CHAIN
            )
        )
        query = select(responses).join(walk, responses.c.id == walk.c.id).order_by(walk.c.depth.desc())
        async with self.database.transaction() as connection:
            return [dict(row._mapping) for row in await connection.execute(query)]

    async def delete(self, response_id: str, project: str) -> bool:
        """Delete one of `project`'s responses and its events; whether it existed."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                delete(responses).where(responses.c.id == response_id, responses.c.project == project)
            )
            if not done.rowcount:
                return False
            for table in (response_events, response_items):
                await connection.execute(delete(table).where(table.c.response_id == response_id))
        return True

    async def add_events(self, response_id: str, events: list[dict[str, Any]], heartbeat: bool) -> str | None:
        """Append a background response's events (and mark it alive); its status as stored, so a job learns
        that it was cancelled, perhaps by another replica."""
        async with self.database.transaction() as connection:
            if events:
                await connection.execute(
                    insert(response_events),
                    [
                        {"response_id": response_id, "sequence_number": e["sequence_number"], "event": e}
                        for e in events
                    ],
                )
            if heartbeat:
                await connection.execute(
                    update(responses).where(responses.c.id == response_id).values(heartbeat=int(time.time()))
                )
            status = await connection.scalar(select(responses.c.status).where(responses.c.id == response_id))
        return None if status is None else str(status)

    async def events(self, response_id: str, after: int) -> list[dict[str, Any]]:
        """A background response's stored events after sequence number `after`."""
        query = (
            select(response_events.c.event)
            .where(response_events.c.response_id == response_id, response_events.c.sequence_number > after)
            .order_by(response_events.c.sequence_number)
        )
        async with self.database.transaction() as connection:
            return [row[0] for row in await connection.execute(query)]

    async def cancel(self, response_id: str, response: dict[str, Any]) -> bool:
        """Mark an unfinished background response cancelled, its stored object (`response`, already saying
        so) with it, in one statement; whether it was unfinished. Nothing makes it unfinished again."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(responses)
                .where(responses.c.id == response_id, responses.c.status.in_(UNFINISHED))
                .values(status="cancelled", response=response)
            )
            if done.rowcount:
                await self._index(connection, response_id, response.get("output", []))
        return bool(done.rowcount)

    async def settle(self, response_id: str, response: dict[str, Any], **values: Any) -> str:
        """Store a background response's state as its job sees it, unless it was cancelled meanwhile: then
        what it made is kept and it stays cancelled. The status it has now."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(responses)
                .where(responses.c.id == response_id, responses.c.status != "cancelled")
                .values(status=response["status"], response=response, **values)
            )
            if done.rowcount:
                await self._index(connection, response_id, response.get("output", []))
                return str(response["status"])
            done = await connection.execute(
                update(responses)
                .where(responses.c.id == response_id)
                .values(response={**response, "status": "cancelled"}, **values)
            )
            if done.rowcount:  # not deleted meanwhile
                await self._index(connection, response_id, response.get("output", []))
        return "cancelled"

    async def _index(self, connection: Any, response_id: str, items: list[Any]) -> None:
        """Index a response's items by id, each once (a background job settles its response several times,
        and a cancel may settle it beside the job: an id already indexed is skipped by the insert itself)."""
        found = (item.get("id") for item in items if isinstance(item, dict))
        ids = sorted({i for i in found if isinstance(i, str) and 0 < len(i) <= ID_CHARS})
        if ids:
            dialect = sqlite if self.database.sqlite else postgresql
            put = dialect.insert(response_items).on_conflict_do_nothing()
            await connection.execute(put, [{"item_id": i, "response_id": response_id} for i in ids])

    async def orphans(self, stale_after: float) -> list[dict[str, Any]]:
        """Unfinished background responses whose job has shown no sign of life for `stale_after` seconds
        (its server stopped)."""
        query = select(responses).where(
            responses.c.status.in_(UNFINISHED),
            responses.c.background.is_(True),
            responses.c.heartbeat < int(time.time()) - stale_after,
        )
        async with self.database.transaction() as connection:
            return [dict(row._mapping) for row in await connection.execute(query)]
