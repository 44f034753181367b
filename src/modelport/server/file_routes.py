"""The routes of the Files and Batch APIs: parse, call the service, frame the answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import Response
from pydantic import BaseModel

from modelport.protocol.requests import Metadata
from modelport.server.http_render import render
from modelport.server.routes import service_of

router = APIRouter()


class BatchRequest(BaseModel):
    """`POST /v1/batches`."""

    input_file_id: str
    endpoint: str
    completion_window: str = "24h"
    metadata: Metadata = None


@router.post("/files")
async def create_file(
    request: Request,
    file: Annotated[UploadFile, File()],
    purpose: Annotated[str, Form()],
    anchor: Annotated[str | None, Form(alias="expires_after[anchor]")] = None,
    seconds: Annotated[int | None, Form(alias="expires_after[seconds]")] = None,
) -> Response:
    """Upload a file (a batch's input: JSONL, checked line by line)."""
    expires = {"anchor": anchor, "seconds": seconds} if anchor or seconds else None
    created = await service_of(request).files.create(file.file, file.filename or "upload", purpose, expires)
    return render(created)


@router.get("/files")
async def list_files(
    request: Request,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    purpose: str | None = None,
) -> Response:
    """Uploaded files, newest first."""
    return render(
        await service_of(request).files.list(after=after, limit=limit, order=order, purpose=purpose)
    )


@router.get("/files/{file_id}")
async def retrieve_file(request: Request, file_id: str) -> Response:
    """One file's record."""
    return render(await service_of(request).files.retrieve(file_id))


@router.get("/files/{file_id}/content")
async def file_content(request: Request, file_id: str) -> Response:
    """A file's bytes."""
    return render(await service_of(request).files.content(file_id))


@router.delete("/files/{file_id}")
async def delete_file(request: Request, file_id: str) -> Response:
    """Delete a file."""
    return render(await service_of(request).files.delete(file_id))


@router.post("/batches")
async def create_batch(request: Request, body: BatchRequest) -> Response:
    """Run a file of requests in the background."""
    return render(await service_of(request).batches.create(**body.model_dump()))


@router.get("/batches")
async def list_batches(request: Request, after: str | None = None, limit: int | None = None) -> Response:
    """Batches, newest first."""
    return render(await service_of(request).batches.list(after=after, limit=limit))


@router.get("/batches/{batch_id}")
async def retrieve_batch(request: Request, batch_id: str) -> Response:
    """A batch's state and counts."""
    return render(await service_of(request).batches.retrieve(batch_id))


@router.post("/batches/{batch_id}/cancel")
async def cancel_batch(request: Request, batch_id: str) -> Response:
    """Stop a batch; what it did is kept."""
    return render(await service_of(request).batches.cancel(batch_id))
