"""Files, uploads and batches: each endpoint's call into the service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelport.protocol.requests import BatchCreate, FileUpload, UploadComplete, UploadCreate
from modelport.service.operations import FilePart

if TYPE_CHECKING:
    from modelport.service import Service


async def create_file(service: Service, body: FileUpload, upload: FilePart) -> object:
    """Upload a file (a batch's input: JSONL, checked line by line)."""
    return await service.files.create(upload.source, upload.name, body.purpose, body.expires_after)


async def list_files(
    service: Service,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    purpose: str | None = None,
) -> object:
    """Uploaded files, newest first."""
    return await service.files.list(after=after, limit=limit, order=order, purpose=purpose)


async def retrieve_file(service: Service, file_id: str) -> object:
    """One file's record."""
    return await service.files.retrieve(file_id)


async def retrieve_file_content(service: Service, file_id: str) -> object:
    """A file's bytes."""
    return await service.files.content(file_id)


async def delete_file(service: Service, file_id: str) -> object:
    """Delete a file."""
    return await service.files.delete(file_id)


async def create_upload(service: Service, body: UploadCreate) -> object:
    """Begin a file sent in parts."""
    return await service.uploads.create(body)


async def add_upload_part(service: Service, upload_id: str, upload: FilePart) -> object:
    """Add a part (64 MB at most) to an upload."""
    return await service.uploads.add_part(upload_id, upload.source)


async def complete_upload(service: Service, upload_id: str, body: UploadComplete) -> object:
    """Join an upload's parts, in the order named, into a file."""
    return await service.uploads.complete(upload_id, body.part_ids, body.md5)


async def cancel_upload(service: Service, upload_id: str) -> object:
    """Cancel an upload: no part may be added any more."""
    return await service.uploads.cancel(upload_id)


async def create_batch(service: Service, body: BatchCreate) -> object:
    """Run a file of requests in the background."""
    return await service.batches.create(**body.model_dump())


async def list_batches(service: Service, after: str | None = None, limit: int | None = None) -> object:
    """Batches, newest first."""
    return await service.batches.list(after=after, limit=limit)


async def retrieve_batch(service: Service, batch_id: str) -> object:
    """A batch's state and counts."""
    return await service.batches.retrieve(batch_id)


async def cancel_batch(service: Service, batch_id: str) -> object:
    """Stop a batch; what it did is kept."""
    return await service.batches.cancel(batch_id)
