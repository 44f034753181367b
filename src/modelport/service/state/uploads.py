"""The Uploads API: a file sent in parts (OpenAI's SDK sends one larger than a part this way,
`uploads.upload_file_chunked`), each part's bytes written to disk as they arrive, the parts joined in the
order the completion names into a File, in one step with the upload marked completed. An upload expires
an hour after it is made, as OpenAI's; its parts are deleted when it is completed, cancelled or found
expired."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from typing import IO, Any

import anyio
from openai.types import FileObject, Upload
from openai.types.uploads import UploadPart

from modelport import context
from modelport.errors import InvalidRequestError, NotFoundError, PayloadTooLargeError, StoreDisabledError
from modelport.ids import new_id
from modelport.protocol.requests import UploadCreate
from modelport.service.operations import PART_BYTES
from modelport.service.state.files import PIECE, Files, check_file_fields, copy_bounded, file_object
from modelport.store import Store

LIFETIME = 3600  # seconds an upload takes parts


def now() -> int:
    """The clock uploads expire by (whole seconds, as their times are)."""
    return int(time.time())


class Uploads:
    """Uploads in the store, their parts beside the files they become."""

    def __init__(self, store: Store | None, files: Files) -> None:
        self.store = store
        self.files = files

    def folder(self, upload_id: str) -> Path:
        """Where an upload's parts are kept until it ends."""
        return self.files.settings.folder() / "uploads" / upload_id

    async def create(self, body: UploadCreate) -> Upload:
        """`POST /v1/uploads`: an upload waiting for its parts (uploads past their hour are expired first,
        their parts deleted)."""
        store = self._store()
        check_file_fields(body.purpose, body.filename, "filename")
        if body.bytes > self.files.settings.max_bytes:
            raise PayloadTooLargeError(
                f"An upload of {body.bytes} bytes is over this server's limit of "
                f"{self.files.settings.max_bytes} for a file.",
                param="bytes",
            )
        moment = now()
        for stale in await store.uploads.expire(moment):
            await self._forget_parts(stale)
        row = {
            "id": new_id("upload", "_"),
            "project": context.current().project,
            "created": moment,
            "expires_at": moment + LIFETIME,
            "status": "pending",
            "bytes": body.bytes,
            "filename": body.filename,
            "purpose": body.purpose,
            "mime_type": body.mime_type,
            "file_expires_after": body.expires_after.seconds if body.expires_after else None,
            "file_id": None,
        }
        await store.uploads.save(row)
        return _upload(row)

    async def add_part(self, upload_id: str, data: IO[bytes]) -> UploadPart:
        """`POST /v1/uploads/{id}/parts`: one part's bytes, written to disk as they arrive (64 MB at most,
        and no more than the upload's `bytes` over all its parts)."""
        store = self._store()
        row = await self._row(upload_id)
        _check_pending(row)
        part_id = new_id("part", "_")
        path = self.folder(upload_id) / part_id
        too_large = PayloadTooLargeError(f"A part holds {PART_BYTES} bytes at most.", param="data")
        size = await anyio.to_thread.run_sync(copy_bounded, data, path, PART_BYTES, too_large)
        created = now()
        part = {"id": part_id, "upload_id": upload_id, "created": created, "bytes": size}
        try:
            added = await store.uploads.add_part(part, row["bytes"], created)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        if not added:
            path.unlink(missing_ok=True)
            _check_pending(await self._row(upload_id))  # cancelled, completed or expired meanwhile
            raise InvalidRequestError(
                f"This part would take the upload's parts past the {row['bytes']} bytes it was created with.",
                param="data",
            )
        return UploadPart(id=part_id, created_at=created, object="upload.part", upload_id=upload_id)

    async def complete(self, upload_id: str, part_ids: list[str], md5: str | None) -> Upload:
        """`POST /v1/uploads/{id}/complete`: the parts named, in that order, joined into a File of the
        upload's name and purpose, recorded with the upload marked completed in one step."""
        store = self._store()
        row = await self._row(upload_id)
        _check_pending(row)
        held = await store.uploads.parts(upload_id)
        unknown = [part_id for part_id in part_ids if part_id not in held]
        if unknown:
            raise InvalidRequestError(f"{unknown[0]} is not a part of upload {upload_id}.", param="part_ids")
        if len(set(part_ids)) != len(part_ids):
            raise InvalidRequestError("part_ids names a part more than once.", param="part_ids")
        total = sum(held[part_id] for part_id in part_ids)
        if total != row["bytes"]:
            raise InvalidRequestError(
                f"The parts named hold {total} bytes; the upload was created for {row['bytes']}.",
                param="part_ids",
            )
        file_id = new_id("file")
        target = self.files.path(file_id)
        parts = [self.folder(upload_id) / part_id for part_id in part_ids]
        digest = await anyio.to_thread.run_sync(_join, parts, target)
        moment = now()
        try:
            if md5 is not None and md5.lower() != digest:
                raise InvalidRequestError(
                    f"The parts' md5 is {digest}, not the {md5} given.", param="md5", code="invalid_value"
                )
            file = {
                "id": file_id,
                "created": moment,
                "bytes": total,
                "filename": row["filename"],
                "purpose": row["purpose"],
                "expires_at": moment + row["file_expires_after"] if row["file_expires_after"] else None,
                "project": row["project"],
            }
            if not await store.uploads.complete(upload_id, row["project"], file, moment):
                _check_pending(await self._row(upload_id))  # another completion or a cancel came first
                raise InvalidRequestError(
                    f"Upload {upload_id} can no longer be completed.", param="upload_id"
                )
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        await self._forget_parts(upload_id)
        return _upload({**row, "status": "completed"}, file_object(file))

    async def cancel(self, upload_id: str) -> Upload:
        """`POST /v1/uploads/{id}/cancel`: no part may be added any more; those added are deleted."""
        store = self._store()
        row = await self._row(upload_id)
        _check_pending(row)
        if not await store.uploads.cancel(upload_id, row["project"]):
            _check_pending(await self._row(upload_id))
        await self._forget_parts(upload_id)
        return _upload({**row, "status": "cancelled"})

    async def _forget_parts(self, upload_id: str) -> None:
        folder = self.folder(upload_id)
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))

    async def _row(self, upload_id: str) -> dict[str, Any]:
        row = await self._store().uploads.get(upload_id, context.current().project)
        if row is None:
            raise NotFoundError(f"No such Upload object: {upload_id}", param="upload_id")
        return row

    def _store(self) -> Store:
        if self.store is None:
            raise StoreDisabledError(
                "Uploads need the store, and this server stores nothing (--database none)."
            )
        return self.store


def _status(row: dict[str, Any]) -> str:
    """An upload's status; a pending one past its hour is expired."""
    return "expired" if row["status"] == "pending" and row["expires_at"] < now() else str(row["status"])


def _check_pending(row: dict[str, Any]) -> None:
    """A 400 saying why an upload takes nothing more."""
    status = _status(row)
    if status != "pending":
        raise InvalidRequestError(
            f"Upload {row['id']} is {status}: it takes nothing more.", param="upload_id"
        )


def _join(parts: list[Path], target: Path) -> str:
    """The parts' bytes written one after another to `target`; their md5, hex."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.md5(usedforsecurity=False)
    try:
        with target.open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while piece := source.read(PIECE):
                        digest.update(piece)
                        out.write(piece)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return digest.hexdigest()


def _upload(row: dict[str, Any], file: FileObject | None = None) -> Upload:
    return Upload(
        id=row["id"],
        bytes=row["bytes"],
        created_at=row["created"],
        expires_at=row["expires_at"],
        filename=row["filename"],
        object="upload",
        purpose=row["purpose"],
        status=_status(row),  # type: ignore[arg-type]
        file=file,
    )
