"""Usage per project, model, key and kind, per minute: added to in batches, summed into wider buckets."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite

from modelport.store.database import Database
from modelport.store.tables import usage

COUNTS = ("requests", "input_tokens", "cached_tokens", "output_tokens", "characters", "seconds", "images")
GROUPS = {"project_id": usage.c.project, "model": usage.c.model, "api_key_id": usage.c.key_id}


class UsageRows:
    """The `usage` table."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def add(self, rows: list[dict[str, Any]]) -> None:
        """Add counts to their minute rows (created when new), in one transaction."""
        if not rows:
            return
        dialect = sqlite if self.database.sqlite else postgresql
        statement = dialect.insert(usage)
        statement = statement.on_conflict_do_update(
            index_elements=["bucket", "project", "model", "key_id", "kind"],
            set_={name: usage.c[name] + statement.excluded[name] for name in COUNTS},
        )
        async with self.database.transaction() as connection:
            for row in rows:
                await connection.execute(statement.values(**row))

    async def buckets(
        self,
        *,
        kind: str,
        start: int,
        end: int,
        width: int,
        projects: list[str] | None,
        models: list[str] | None,
        group_by: list[str],
    ) -> list[dict[str, Any]]:
        """Sums over buckets of `width` seconds from `start` (aligned on it) to `end`, grouped as asked."""
        bucket = (start + (usage.c.bucket - start) // width * width).label("start")
        grouped = [GROUPS[name].label(name) for name in group_by]
        query = (
            select(bucket, *grouped, *(func.sum(usage.c[name]).label(name) for name in COUNTS))
            .where(usage.c.kind == kind, usage.c.bucket >= start, usage.c.bucket < end)
            .group_by(bucket, *grouped)
            .order_by(bucket)
        )
        if projects:
            query = query.where(usage.c.project.in_(projects))
        if models:
            query = query.where(usage.c.model.in_(models))
        async with self.database.transaction() as connection:
            return [dict(row._mapping) for row in await connection.execute(query)]
