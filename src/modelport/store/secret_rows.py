"""Realtime client secrets (ephemeral keys), kept as hashes until they expire."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import delete, insert, select

from modelport.store.database import Database
from modelport.store.tables import client_secrets


class SecretRows:
    """The `client_secrets` table."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def create(self, row: dict[str, Any]) -> None:
        """Record a secret (its hash), and drop those expired (they can open nothing any more)."""
        async with self.database.transaction() as connection:
            await connection.execute(
                delete(client_secrets).where(client_secrets.c.expires_at <= int(time.time()))
            )
            await connection.execute(insert(client_secrets).values(**row))

    async def by_hash(self, digest: str) -> dict[str, Any] | None:
        """The secret with this hash, or None."""
        async with self.database.transaction() as connection:
            query = select(client_secrets).where(client_secrets.c.hash == digest)
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None
