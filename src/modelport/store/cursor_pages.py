"""Cursor pages in OpenAI's list shape: ordered on (created, id), so rows created in the same second are
never skipped nor repeated, and an index serves every page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import ColumnElement, Table, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from modelport.errors import NotFoundError

Order = Literal["asc", "desc"]


@dataclass(frozen=True)
class Page:
    """One page of rows, and whether more follow."""

    rows: list[dict[str, Any]]
    has_more: bool


async def page(
    connection: AsyncConnection,
    table: Table,
    where: list[ColumnElement[bool]],
    *,
    project: str,
    after: str | None,
    limit: int,
    order: Order,
    what: str,
) -> Page:
    """Up to `limit` rows of `project`'s `table` matching `where`, after the row `after` in `order`."""
    key = tuple_(table.c.created, table.c.id)
    owned = table.c.project == project
    conditions = [owned, *where]
    if after is not None:
        anchor = (
            await connection.execute(select(table.c.created, table.c.id).where(table.c.id == after, owned))
        ).first()
        if anchor is None:
            raise NotFoundError(f"No {what} found with id '{after}' (the `after` cursor).", param="after")
        conditions.append(key > tuple_(*anchor) if order == "asc" else key < tuple_(*anchor))
    sort = (
        (table.c.created.asc(), table.c.id.asc())
        if order == "asc"
        else (table.c.created.desc(), table.c.id.desc())
    )
    query = select(table).where(*conditions).order_by(*sort).limit(limit + 1)
    rows = [dict(row._mapping) for row in await connection.execute(query)]
    return Page(rows[:limit], len(rows) > limit)
