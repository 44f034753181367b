"""The Batch API: a JSONL file of requests run in the background, beside live traffic and below it, through
the same service as live requests; its results go to an output file and an error file."""

from __future__ import annotations

import time
from typing import Any

from openai.types import Batch

from modelport import context
from modelport.errors import ConflictError, InvalidRequestError, NotFoundError, StoreDisabledError
from modelport.ids import new_id
from modelport.protocol.answers import ListPage
from modelport.protocol.requests import Metadata
from modelport.service.operation_table import BATCH_ENDPOINTS
from modelport.service.state.batch_runner import BatchRunner
from modelport.service.state.files import Files
from modelport.service.state.listing import bounded_limit
from modelport.store import Store

WINDOW_SECONDS = 24 * 3600


class Batches:
    """`/v1/batches`: create, retrieve, list, cancel; the runner does the work."""

    def __init__(self, store: Store | None, files: Files, runner: BatchRunner) -> None:
        self.store = store
        self.files = files
        self.runner = runner

    async def create(
        self,
        *,
        input_file_id: str,
        endpoint: str,
        completion_window: str = "24h",
        metadata: Metadata = None,
    ) -> Batch:
        """`POST /v1/batches`: validated in the background (its lines then run, or it fails naming each line
        at fault, as OpenAI's batches do)."""
        store = self._store()
        if endpoint not in BATCH_ENDPOINTS:
            raise InvalidRequestError(
                f"endpoint must be one of {', '.join(BATCH_ENDPOINTS)}, not {endpoint!r}.",
                param="endpoint",
                code="invalid_value",
            )
        if completion_window != "24h":
            raise InvalidRequestError(
                "completion_window must be '24h'.", param="completion_window", code="invalid_value"
            )
        try:
            source = await self.files.retrieve(input_file_id)
        except NotFoundError:
            source = None  # as OpenAI: the batch is made, and fails while it validates (`invalid_file`)
        if source is not None and source.purpose != "batch":
            raise InvalidRequestError(
                f"The file {input_file_id} has purpose {source.purpose!r}, not 'batch'.",
                param="input_file_id",
            )
        now = int(time.time())
        batch = {
            "id": new_id("batch", "_"),
            "object": "batch",
            "endpoint": endpoint,
            "errors": None,
            "input_file_id": input_file_id,
            "completion_window": completion_window,
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + WINDOW_SECONDS,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},  # counted as it validates
            "metadata": metadata,
        }
        await store.batches.save(batch, context.current().project)
        self.runner.wake()
        return Batch.model_validate(batch)

    async def retrieve(self, batch_id: str) -> Batch:
        """`GET /v1/batches/{id}`."""
        return Batch.model_validate((await self._row(batch_id))["batch"])

    async def list(self, *, after: str | None = None, limit: int | None = None) -> ListPage[Batch]:
        """`GET /v1/batches`: newest first."""
        page = await self._store().batches.list_page(
            project=context.current().project, after=after, limit=bounded_limit(limit), order="desc"
        )
        return ListPage([Batch.model_validate(row["batch"]) for row in page.rows], page.has_more)

    async def cancel(self, batch_id: str) -> Batch:
        """`POST /v1/batches/{id}/cancel`: no new request starts (nor one waiting for a model's slot); those
        running finish and are kept. A cancel is final: whatever the runner writes next cannot undo it."""
        row = await self._row(batch_id)
        batch = row["batch"]
        if batch["status"] in ("validating", "in_progress"):
            cancelled = {**batch, "status": "cancelling", "cancelling_at": int(time.time())}
            if await self._store().batches.cancel(batch_id, cancelled):
                self.runner.cancelled(batch_id)
                return Batch.model_validate(cancelled)
            batch = (await self._row(batch_id))["batch"]  # it moved on meanwhile: answer as it is now
        if batch["status"] in ("completed", "failed", "expired", "cancelled"):
            raise ConflictError(
                f"Cannot cancel a batch that is {batch['status']}.",
                param="batch_id",
                code="batch_not_cancellable",
            )
        return Batch.model_validate(batch)

    async def _row(self, batch_id: str) -> dict[str, Any]:
        row = await self._store().batches.get(batch_id, context.current().project)
        if row is None:
            raise NotFoundError(f"No batch found with id '{batch_id}'.", param="batch_id")
        return row

    def _store(self) -> Store:
        if self.store is None:
            raise StoreDisabledError(
                "Batches need the store, and this server stores nothing (--database none)."
            )
        return self.store
