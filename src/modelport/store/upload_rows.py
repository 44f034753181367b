"""Uploads' and their parts' records (the parts' bytes are on disk, kept by the service). Each change of an
upload's state is one statement or one transaction, guarded by the state it changes from: two completions
of one upload, or a part added as it is cancelled, cannot both take effect."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, insert, select, update

from modelport.store.database import Database
from modelport.store.tables import files, upload_parts, uploads

PENDING = "pending"


class UploadRows:
    """The `uploads` and `upload_parts` tables."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def save(self, row: dict[str, Any]) -> None:
        """Record an upload (`row` names its project)."""
        async with self.database.transaction() as connection:
            await connection.execute(insert(uploads).values(**row))

    async def get(self, upload_id: str, project: str) -> dict[str, Any] | None:
        """One of `project`'s uploads, or None."""
        async with self.database.transaction() as connection:
            query = select(uploads).where(uploads.c.id == upload_id, uploads.c.project == project)
            row = (await connection.execute(query)).first()
        return dict(row._mapping) if row else None

    async def add_part(self, part: dict[str, Any], limit: int, now: int) -> bool:
        """Record a part of a pending, unexpired upload whose parts then hold no more than `limit` bytes;
        whether it was (the caller has its upload's row, so knows which it was not)."""
        async with self.database.transaction() as connection:
            open_upload = select(uploads.c.id).where(
                uploads.c.id == part["upload_id"], uploads.c.status == PENDING, uploads.c.expires_at >= now
            )
            if (await connection.execute(open_upload.with_for_update())).first() is None:
                return False
            held = select(func.coalesce(func.sum(upload_parts.c.bytes), 0)).where(
                upload_parts.c.upload_id == part["upload_id"]
            )
            if int((await connection.execute(held)).scalar_one()) + part["bytes"] > limit:
                return False
            await connection.execute(insert(upload_parts).values(**part))
        return True

    async def parts(self, upload_id: str) -> dict[str, int]:
        """An upload's parts: their ids and sizes."""
        query = select(upload_parts.c.id, upload_parts.c.bytes).where(upload_parts.c.upload_id == upload_id)
        async with self.database.transaction() as connection:
            return {part_id: size for part_id, size in await connection.execute(query)}

    async def complete(self, upload_id: str, project: str, file: dict[str, Any], now: int) -> bool:
        """In one step: a pending, unexpired upload of `project`'s marked completed with `file`, and `file`
        recorded; whether it was."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(uploads)
                .where(
                    uploads.c.id == upload_id,
                    uploads.c.project == project,
                    uploads.c.status == PENDING,
                    uploads.c.expires_at >= now,
                )
                .values(status="completed", file_id=file["id"])
            )
            if not done.rowcount:
                return False
            await connection.execute(insert(files).values(**file))
        return True

    async def cancel(self, upload_id: str, project: str) -> bool:
        """A pending upload of `project`'s marked cancelled; whether it was."""
        async with self.database.transaction() as connection:
            done = await connection.execute(
                update(uploads)
                .where(uploads.c.id == upload_id, uploads.c.project == project, uploads.c.status == PENDING)
                .values(status="cancelled")
            )
        return bool(done.rowcount)

    async def expire(self, now: int) -> list[str]:
        """Pending uploads past their hour marked expired (any project's); their ids."""
        async with self.database.transaction() as connection:
            stale = select(uploads.c.id).where(uploads.c.status == PENDING, uploads.c.expires_at < now)
            ids = [upload_id for (upload_id,) in await connection.execute(stale)]
            if ids:
                await connection.execute(
                    update(uploads)
                    .where(uploads.c.id.in_(ids), uploads.c.status == PENDING)
                    .values(status="expired")
                )
        return ids
