"""The Files API: uploads written to disk as they arrive (under a bound), records in the store, contents
read back in pieces. A batch input is checked line by line on upload."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import IO, Any, cast

import anyio
import orjson
from openai.types import FileDeleted, FileObject

from modelport import context
from modelport.errors import InvalidRequestError, NotFoundError, PayloadTooLargeError, StoreDisabledError
from modelport.ids import new_id
from modelport.protocol.answers import Binary, ListPage
from modelport.protocol.requests import FileExpiry
from modelport.protocol.sdk_private import loosely
from modelport.service.operation_table import OPERATIONS
from modelport.service.state.listing import bounded_limit, checked_order
from modelport.settings import FileSettings
from modelport.store import Store

PURPOSES = ("batch", "batch_output", "assistants", "assistants_output", "fine-tune", "fine-tune-results",
            "vision", "user_data", "evals")  # fmt: skip
PIECE = 1024 * 1024  # bytes read or written at a time
FILENAME_CHARS = 512  # what the store's column holds


LineError = dict[str, Any]  # OpenAI's batch error: `code`, `line`, `message`, `param`


def checked_lines(
    path: Path, endpoint: str, known_model: Callable[[str], bool] | None = None
) -> tuple[list[dict[str, Any]], list[LineError]]:
    """The requests of a batch input file, and what is wrong with it as OpenAI says it while a batch
    validates: each line a JSON object with a unique `custom_id`, `method` POST, the batch's `url` and a
    `body` object naming a model this server knows, not streamed. A batch with any error fails whole."""
    requests: list[dict[str, Any]] = []
    errors: list[LineError] = []
    seen: set[str] = set()
    required = _required(endpoint)  # once for the file, not per line
    with path.open("rb") as file:
        for number, raw in enumerate(file, 1):
            if not raw.strip():
                continue
            error = _line_error(raw, endpoint, required, seen, known_model)
            if error is not None:
                errors.append({"line": number, **error})
                continue
            line = orjson.loads(raw)
            requests.append({"line": number, "custom_id": line["custom_id"], "body": line["body"]})
    if not requests and not errors:
        errors.append(
            {
                "code": "empty_file",
                "line": None,
                "message": "The batch input file has no requests.",
                "param": None,
            }
        )
    return requests, errors


def _line_error(
    raw: bytes,
    endpoint: str,
    required: list[str],
    seen: set[str],
    known_model: Callable[[str], bool] | None,
) -> LineError | None:
    def error(code: str, message: str, param: str | None = None) -> LineError:
        return {"code": code, "message": message, "param": param}

    try:
        line = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return error("invalid_json_line", "This line is not parseable as valid JSON.")
    if not isinstance(line, dict):
        return error("invalid_json_line", "This line is not a JSON object.")
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return error("missing_required_parameter", "The line has no `custom_id`.", "custom_id")
    if custom_id in seen:
        return error("duplicate_custom_id", f"The custom_id {custom_id!r} is not unique.", "custom_id")
    seen.add(custom_id)
    if line.get("method") != "POST":
        return error("invalid_method", "The line's `method` must be POST.", "method")
    if line.get("url") != endpoint:
        return error("invalid_url", f"The line's `url` must be the batch's endpoint, {endpoint}.", "url")
    body = line.get("body")
    if not isinstance(body, dict):
        return error("missing_required_parameter", "The line has no `body` object.", "body")
    if body.get("stream"):
        return error("streaming_unsupported", "A batch's requests are not streamed.", "body.stream")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return error("missing_required_parameter", "The line's body names no `model`.", "body.model")
    if known_model is not None and not known_model(model):
        return error("model_not_found", f"The model `{model}` does not exist.", "body.model")
    for name in required:
        if name not in body:  # as OpenAI words it ("Messages parameter is required.")
            return error("invalid_request", f"{name.capitalize()} parameter is required.", f"body.{name}")
    return None


def _required(endpoint: str) -> list[str]:
    """The body fields the operation an endpoint names requires (its request model's), but `model`."""
    operation = OPERATIONS.batch_endpoint(endpoint)
    model = operation.body_model if operation is not None else None
    if model is None:
        return []
    return [name for name, field in model.model_fields.items() if field.is_required() and name != "model"]


class Files:
    """Uploaded files: bytes in the files folder, records in the store."""

    def __init__(self, store: Store | None, settings: FileSettings) -> None:
        self.store = store
        self.settings = settings

    def path(self, file_id: str) -> Path:
        """Where a file's bytes are."""
        return self.settings.folder() / file_id

    async def create(
        self, source: IO[bytes], filename: str, purpose: str, expires_after: FileExpiry | None = None
    ) -> FileObject:
        """`POST /v1/files`: copy the upload to disk in pieces and record it (a batch input is checked when a
        batch of it validates, as OpenAI does)."""
        store = self._store()
        check_file_fields(purpose, filename, "file")
        file_id = new_id("file")
        path = self.path(file_id)
        too_large = PayloadTooLargeError(
            f"The file is over the limit of {self.settings.max_bytes} bytes.", param="file"
        )
        size = await anyio.to_thread.run_sync(copy_bounded, source, path, self.settings.max_bytes, too_large)
        try:
            row = {
                "id": file_id,
                "created": int(time.time()),
                "bytes": size,
                "filename": filename,
                "purpose": purpose,
                "expires_at": int(time.time()) + expires_after.seconds if expires_after else None,
                "project": context.current().project,
            }
            await store.files.save(row)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return file_object(row)

    async def save(
        self, file_id: str, content: bytes, filename: str, purpose: str, project: str
    ) -> FileObject:
        """Keep bytes made here (a batch's output) as `project`'s file; the same id again replaces it."""
        store = self._store()
        path = self.path(file_id)
        await anyio.to_thread.run_sync(_write, path, content)
        row = {
            "id": file_id,
            "created": int(time.time()),
            "bytes": len(content),
            "filename": filename,
            "purpose": purpose,
            "expires_at": None,
            "project": project,
        }
        await store.files.delete(file_id, project)
        await store.files.save(row)
        return file_object(row)

    async def retrieve(self, file_id: str) -> FileObject:
        """`GET /v1/files/{id}`."""
        return file_object(await self._row(file_id))

    async def retrieve_as(self, file_id: str, param: str) -> FileObject:
        """One of the caller's files that a request names in `param` (a 404 naming it)."""
        row = await self._store().files.get(file_id, context.current().project)
        if row is None:
            raise NotFoundError(f"No such File object: {file_id}", param=param)
        return file_object(row)

    async def names(self, file_ids: list[str]) -> dict[str, str]:
        """The names of those of `file_ids` that are the caller's."""
        return await self._store().files.names(file_ids, context.current().project)

    async def list(
        self,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        purpose: str | None = None,
    ) -> ListPage[FileObject]:
        """`GET /v1/files`: newest first unless `order` is `asc`."""
        page = await self._store().files.list_page(
            project=context.current().project,
            after=after,
            limit=bounded_limit(limit, 10_000, 10_000),
            order=checked_order(order, "desc"),
            purpose=purpose,
        )
        return ListPage([file_object(row) for row in page.rows], page.has_more)

    async def content(self, file_id: str) -> Binary:
        """`GET /v1/files/{id}/content`: the bytes, read in pieces as they are sent."""
        await self._row(file_id)
        path = self.path(file_id)

        async def pieces() -> AsyncGenerator[bytes, None]:
            async with await anyio.open_file(path, "rb") as file:
                while piece := await file.read(PIECE):
                    yield piece

        return Binary("application/octet-stream", chunks=pieces())

    async def read(self, file_id: str, max_bytes: int) -> tuple[str, bytes]:
        """A file's name and bytes, for a request that refers to it (a 404 if it is not the caller's, a 400
        if it is over `max_bytes`)."""
        row = await self._row(file_id)
        if row["bytes"] > max_bytes:
            raise InvalidRequestError(
                f"The file {file_id} is {row['bytes']} bytes, over the limit of {max_bytes}.", param="file_id"
            )
        content = await anyio.Path(self.path(file_id)).read_bytes()
        return row["filename"], content

    async def delete(self, file_id: str) -> FileDeleted:
        """`DELETE /v1/files/{id}`."""
        if not await self._store().files.delete(file_id, context.current().project):
            raise _missing(file_id)
        await anyio.to_thread.run_sync(lambda: self.path(file_id).unlink(missing_ok=True))
        return FileDeleted(id=file_id, object="file", deleted=True)

    async def _row(self, file_id: str) -> dict[str, Any]:
        row = await self._store().files.get(file_id, context.current().project)
        if row is None:
            raise _missing(file_id)
        return row

    def _store(self) -> Store:
        if self.store is None:
            raise StoreDisabledError(
                "Files need the store, and this server stores nothing (--database none)."
            )
        return self.store


def check_file_fields(purpose: str, filename: str, filename_param: str) -> None:
    """A 400 for a purpose OpenAI does not have, or a name longer than the store keeps (`filename_param`
    names where the name came in)."""
    if purpose not in PURPOSES:
        raise InvalidRequestError(
            f"purpose must be one of {', '.join(PURPOSES)}, not {purpose!r}.", param="purpose"
        )
    if len(filename) > FILENAME_CHARS:
        raise InvalidRequestError(
            f"The file's name is {len(filename)} characters; the most is {FILENAME_CHARS}.",
            param=filename_param,
        )


def copy_bounded(source: IO[bytes], path: Path, limit: int, too_large: PayloadTooLargeError) -> int:
    """`source` written to `path` in pieces as it is read, `too_large` raised (and nothing left) once it
    is past `limit` bytes; its size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    size = 0
    try:
        with path.open("wb") as out:
            while piece := source.read(PIECE):
                size += len(piece)
                if size > limit:
                    raise too_large
                out.write(piece)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return size


def _write(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(content)
    os.replace(partial, path)


def file_object(row: dict[str, Any]) -> FileObject:
    """A file's record as the File object, built as the SDK builds what a server sent: OpenAI's purposes
    include some its type does not list yet (`evals`), which validating it refused (a 500, after the file
    was kept)."""
    return cast(
        FileObject,
        loosely(
            FileObject,
            {
                "id": row["id"],
                "object": "file",
                "bytes": row["bytes"],
                "created_at": row["created"],
                "filename": row["filename"],
                "purpose": row["purpose"],
                "status": "processed",
                "expires_at": row["expires_at"],
            },
        ),
    )


def _missing(file_id: str) -> NotFoundError:
    return NotFoundError(f"No such File object: {file_id}", param="file_id")
