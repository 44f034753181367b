"""Projects and their API keys (kept as hashes)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError

from modelport.errors import ConflictError
from modelport.store.database import Database
from modelport.store.tables import api_keys, projects


class ProjectRows:
    """The `projects` table."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def create(self, row: dict[str, Any]) -> None:
        """Add a project; a 409 if its name is taken."""
        try:
            async with self.database.transaction() as connection:
                await connection.execute(insert(projects).values(**row))
        except IntegrityError as error:
            raise ConflictError(f"A project named '{row['name']}' exists already.", param="name") from error

    async def get(self, project_id: str) -> dict[str, Any] | None:
        """One project by id, or None."""
        async with self.database.transaction() as connection:
            row = (await connection.execute(select(projects).where(projects.c.id == project_id))).first()
        return dict(row._mapping) if row else None

    async def named(self, name: str) -> dict[str, Any] | None:
        """One project by name (or id), or None."""
        query = select(projects).where((projects.c.name == name) | (projects.c.id == name))
        async with self.database.transaction() as connection:
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None

    async def all(self) -> list[dict[str, Any]]:
        """Every project, oldest first."""
        async with self.database.transaction() as connection:
            rows = await connection.execute(select(projects).order_by(projects.c.created, projects.c.id))
            return [dict(row._mapping) for row in rows]

    async def change(self, project_id: str, **values: Any) -> bool:
        """Rename, archive or set the limits of a project; whether it exists."""
        try:
            async with self.database.transaction() as connection:
                done = await connection.execute(
                    update(projects).where(projects.c.id == project_id).values(**values)
                )
        except IntegrityError as error:
            raise ConflictError(f"A project named '{values.get('name')}' exists already.") from error
        return bool(done.rowcount)


class KeyRows:
    """The `api_keys` table."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def create(self, row: dict[str, Any]) -> None:
        """Record a key (its hash)."""
        async with self.database.transaction() as connection:
            await connection.execute(insert(api_keys).values(**row))

    async def by_hash(self, digest: str) -> dict[str, Any] | None:
        """The key with this hash, with its project's limits and archive date, or None."""
        query = (
            select(api_keys, projects.c.limits.label("project_limits"), projects.c.archived_at)
            .join(projects, projects.c.id == api_keys.c.project)
            .where(api_keys.c.hash == digest)
        )
        async with self.database.transaction() as connection:
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None

    async def get(self, key_id: str) -> dict[str, Any] | None:
        """One key by id, or None."""
        async with self.database.transaction() as connection:
            row = (await connection.execute(select(api_keys).where(api_keys.c.id == key_id))).first()
        return dict(row._mapping) if row else None

    async def of(self, project_id: str | None) -> list[dict[str, Any]]:
        """The keys of a project (or of all), oldest first."""
        query = select(api_keys).order_by(api_keys.c.created, api_keys.c.id)
        if project_id is not None:
            query = query.where(api_keys.c.project == project_id)
        async with self.database.transaction() as connection:
            return [dict(row._mapping) for row in await connection.execute(query)]

    async def any_live(self) -> bool:
        """Whether any key is neither revoked nor expired (then every request needs a key)."""
        now = int(time.time())
        query = select(func.count()).where(
            api_keys.c.revoked_at.is_(None),
            (api_keys.c.expires_at.is_(None)) | (api_keys.c.expires_at > now),
        )
        async with self.database.transaction() as connection:
            return bool(await connection.scalar(query))

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key; whether it exists (revoking twice keeps the first date)."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(api_keys)
                .where(api_keys.c.id == key_id)
                .values(revoked_at=func.coalesce(api_keys.c.revoked_at, int(time.time())))
            )
        return bool(done.rowcount)

    async def used(self, last_used: dict[str, int]) -> None:
        """Record when keys were last used (written in batches, not per request)."""
        async with self.database.transaction() as connection:
            for key_id, at in last_used.items():
                await connection.execute(
                    update(api_keys).where(api_keys.c.id == key_id).values(last_used_at=at)
                )
