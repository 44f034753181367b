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
    before: str | None = None,
) -> Page:
    """Up to `limit` rows of `project`'s `table` matching `where`, in `order`: those right after the row
    `after`, or right before the row `before` (`has_more` then says whether more precede them)."""
    key = tuple_(table.c.created, table.c.id)
    conditions = [table.c.project == project, *where]
    ascending = order == "asc"
    for cursor, name, later in ((after, "after", ascending), (before, "before", not ascending)):
        if cursor is None:
            continue
        anchor = (
            await connection.execute(
                select(table.c.created, table.c.id).where(table.c.id == cursor, *conditions)
            )
        ).first()
        if anchor is None:
            raise NotFoundError(f"No {what} found with id '{cursor}' (the `{name}` cursor).", param=name)
        conditions.append(key > tuple_(*anchor) if later else key < tuple_(*anchor))
    backwards = before is not None and after is None
    up = ascending != backwards
    sort = (table.c.created.asc(), table.c.id.asc()) if up else (table.c.created.desc(), table.c.id.desc())
    query = select(table).where(*conditions).order_by(*sort).limit(limit + 1)
    rows = [dict(row._mapping) for row in await connection.execute(query)]
    kept = rows[:limit]
    return Page(kept[::-1] if backwards else kept, len(rows) > limit)
