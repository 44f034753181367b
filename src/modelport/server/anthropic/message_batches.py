"""Anthropic's Message Batches API (`/v1/messages/batches`) over the Batch operation: a batch of Messages
requests is a Batch API file of the chat requests they become (each translated as `POST /v1/messages`
translates it), run by the same runner under the caller's project, models and limits; its results are the
runner's output and error lines as Anthropic's. A message batch is a row of `batches` marked as one (its
metadata), `msgbatch_…` for `batch_…`, so the OpenAI face lists it too. Deleting one has no counterpart (a
Batch API batch stays), and is not routed."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import Query, Request
from fastapi.responses import Response
from openai.types import Batch, FileObject
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, Field

from modelport.errors import InvalidRequestError, NotFoundError
from modelport.protocol.answers import Binary, ListPage
from modelport.server.anthropic.message_request import MessagesRequest
from modelport.server.anthropic.routes import json_answer, seal_of, verifier
from modelport.server.anthropic.to_chat import chat_request
from modelport.server.error_shapes import anthropic_error_type
from modelport.server.json_routes import json_router
from modelport.service import Service
from modelport.service.operation_table import OPERATIONS
from modelport.service.operations import FilePart

if TYPE_CHECKING:
    from anthropic.types.messages import MessageBatch

router = json_router("/v1")
MARK = "anthropic_message_batch"  # the metadata key that makes a batch a message batch
_PREFIX = "msgbatch_"
_ENDED = ("completed", "failed", "expired", "cancelled")
_STATUS = {"cancelling": "canceling", **dict.fromkeys(_ENDED, "ended")}  # else `in_progress`
_FILE, _CONTENT = OPERATIONS.by_name("files.create"), OPERATIONS.by_name("files.content")
_CREATE, _LIST = OPERATIONS.by_name("batches.create"), OPERATIONS.by_name("batches.list")
_GET, _CANCEL = OPERATIONS.by_name("batches.retrieve"), OPERATIONS.by_name("batches.cancel")


class BatchRequest(BaseModel):
    custom_id: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    params: MessagesRequest


class MessageBatchCreate(BaseModel):
    """`POST /v1/messages/batches`."""

    requests: list[BatchRequest] = Field(min_length=1, max_length=100_000)


@router.post("/messages/batches", response_class=Response, tags=["Anthropic"])
async def create_message_batch(request: Request, given: MessageBatchCreate) -> Response:
    """Messages requests run in the background, each as `POST /v1/messages` would answer it."""
    service: Service = request.app.state.service
    verify, seen, lines = verifier(service), set[str](), []
    for i, asked in enumerate(given.requests):
        where = f"requests[{i}]"
        if asked.custom_id in seen:
            raise InvalidRequestError(
                f"custom_id {asked.custom_id!r} is given twice: each request's must be unique in its batch.",
                param=f"{where}.custom_id",
            )
        seen.add(asked.custom_id)
        if asked.params.stream:
            raise InvalidRequestError("A batch's requests are not streamed.", param=f"{where}.params.stream")
        try:
            chat, _ = chat_request(asked.params, verify, stream=False)
        except InvalidRequestError as error:
            raise InvalidRequestError(
                error.message, param=f"{where}.params.{error.param or ''}".rstrip(".")
            ) from None
        # A model the runner does not know fails the whole batch as it is checked: said here, of this one.
        if not service.batches.runner.known_model(chat.model):
            raise InvalidRequestError(
                f"The model `{chat.model}` does not exist.",
                param=f"{where}.params.model",
                code="model_not_found",
            )
        body = chat.model_dump(mode="json", exclude_unset=True)
        line = {"custom_id": asked.custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
        lines.append(orjson.dumps(line) + b"\n")
    upload = FilePart.of("message_batch.jsonl", b"".join(lines))
    file = await _FILE.invoke(service, {}, body={"purpose": "batch"}, upload=upload)
    assert isinstance(file, FileObject)
    body = {"input_file_id": file.id, "endpoint": "/v1/chat/completions", "metadata": {MARK: "1"}}
    batch = await _CREATE.invoke(service, {}, body=body)
    assert isinstance(batch, Batch)
    return json_answer(await _shown(request, service, batch, len(lines)))


@router.get("/messages/batches", response_class=Response, tags=["Anthropic"])
async def list_message_batches(
    request: Request,
    limit: int = Query(default=20, ge=1, le=1000),
    after_id: str | None = None,
    before_id: str | None = None,
) -> Response:
    """The caller's message batches, newest first, a page (`after_id` and `before_id` as Anthropic's)."""
    service: Service = request.app.state.service
    batches, after = [], None
    while True:  # every batch of the project: message batches are those among them marked so
        page = await _LIST.invoke(service, {}, values={"after": after, "limit": 100})
        assert isinstance(page, ListPage)
        batches += [batch for batch in page.data if (batch.metadata or {}).get(MARK)]
        if not page.has_more or not page.data:
            break
        after = page.data[-1].id
    ids = [_message_batch_id(batch.id) for batch in batches]
    for name, cursor in (("after_id", after_id), ("before_id", before_id)):
        # As the OpenAI face's lists answer a cursor that is none of the caller's objects.
        if cursor is not None and cursor not in ids:
            raise NotFoundError(f"No message batch found with id '{cursor}'.", param=name)
    start, end = 0, len(batches)
    if after_id is not None:
        start = ids.index(after_id) + 1
    if before_id is not None:
        end = ids.index(before_id)
        start = max(start, end - limit)
    chosen = batches[start:end][:limit]
    shown = [await _shown(request, service, batch) for batch in chosen]
    more = end > start + len(chosen) if before_id is None else start > 0
    # Anthropic's page is OpenAI's list shape (`data`, `has_more`, `first_id`, `last_id`) but `object`.
    return Response(orjson.dumps(ListPage(shown, more).body()), media_type="application/json")


@router.get("/messages/batches/{message_batch_id}", response_class=Response, tags=["Anthropic"])
async def retrieve_message_batch(request: Request, message_batch_id: str) -> Response:
    """A message batch's state and counts."""
    service: Service = request.app.state.service
    return json_answer(await _shown(request, service, await _batch(service, message_batch_id)))


@router.post("/messages/batches/{message_batch_id}/cancel", response_class=Response, tags=["Anthropic"])
async def cancel_message_batch(request: Request, message_batch_id: str) -> Response:
    """No request of the batch starts from now; those running finish and keep their results."""
    service: Service = request.app.state.service
    batch = await _batch(service, message_batch_id)
    cancelled = await _CANCEL.invoke(service, {"batch_id": batch.id})
    assert isinstance(cancelled, Batch)
    return json_answer(await _shown(request, service, cancelled))


@router.get("/messages/batches/{message_batch_id}/results", response_class=Response, tags=["Anthropic"])
async def message_batch_results(request: Request, message_batch_id: str) -> Response:
    """An ended batch's results, a JSON line each, as Anthropic's (in no particular order, as theirs)."""
    from anthropic.types.messages import MessageBatchIndividualResponse

    from modelport.server.anthropic.from_chat import message

    service: Service = request.app.state.service
    batch = await _batch(service, message_batch_id)
    if batch.status not in _ENDED:
        raise InvalidRequestError(
            f"Message batch {message_batch_id} is still processing: its results come once it has ended.",
            param="message_batch_id",
        )
    seal, results = seal_of(service), []
    for record in await _records(service, batch.output_file_id):
        answer = ChatCompletion.model_validate(record["response"]["body"])
        results.append(
            {
                "custom_id": record["custom_id"],
                "result": {"type": "succeeded", "message": message(answer, seal)},
            }
        )
    for record in await _records(service, batch.error_file_id):
        results.append({"custom_id": record["custom_id"], "result": _failed(record)})
    if batch.status in ("cancelled", "failed"):  # the requests it never ran: cancelled, or all refused
        told = {result["custom_id"] for result in results}
        refused = {error.line: error for error in ((batch.errors and batch.errors.data) or ()) if error.line}
        for number, line in enumerate(await _records(service, batch.input_file_id), 1):
            if line["custom_id"] in told:
                continue
            result: dict[str, Any] = {"type": "canceled"}
            if batch.status == "failed":
                error = refused.get(number)
                said = "Not run: another request of the batch was refused."
                if error is not None:
                    said = error.message or "The request was refused."
                result = _errored("invalid_request_error", said)
            results.append({"custom_id": line["custom_id"], "result": result})
    lines = [
        MessageBatchIndividualResponse.model_validate(result).model_dump_json(exclude_unset=True)
        for result in results
    ]
    return Response("".join(f"{line}\n" for line in lines), media_type="application/binary")


def _failed(record: dict[str, Any]) -> dict[str, Any]:
    """A request's error line as Anthropic's result: expired with the batch's window, or errored."""
    if (record.get("error") or {}).get("code") == "batch_expired":
        return {"type": "expired"}
    response = record.get("response") or {}
    error = (response.get("body") or {}).get("error") or record.get("error") or {}
    kind = anthropic_error_type(int(response.get("status_code") or 500))
    return _errored(kind, str(error.get("message") or "The request failed."))


def _errored(kind: str, message: str) -> dict[str, Any]:
    """An errored result: Anthropic's error of type `kind` (`invalid_request_error`, …)."""
    return {"type": "errored", "error": {"type": "error", "error": {"type": kind, "message": message}}}


async def _batch(service: Service, message_batch_id: str) -> Batch:
    """The batch a message batch id names, in the caller's project (a 404 for any other batch)."""
    missing = NotFoundError(f"No message batch found with id '{message_batch_id}'.", param="message_batch_id")
    if not message_batch_id.startswith(_PREFIX):
        raise missing
    try:
        batch = await _GET.invoke(service, {"batch_id": "batch_" + message_batch_id.removeprefix(_PREFIX)})
    except NotFoundError:
        raise missing from None
    assert isinstance(batch, Batch)
    if not (batch.metadata or {}).get(MARK):
        raise missing
    return batch


async def _records(service: Service, file_id: str | None) -> list[dict[str, Any]]:
    """A JSONL file's lines (none for no file)."""
    if file_id is None:
        return []
    content = await _CONTENT.invoke(service, {"file_id": file_id})
    assert isinstance(content, Binary)
    data = b"".join([piece async for piece in content.pieces()])
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def _message_batch_id(batch_id: str) -> str:
    return _PREFIX + batch_id.removeprefix("batch_")


def _time(seconds: int | None) -> datetime.datetime | None:
    return None if seconds is None else datetime.datetime.fromtimestamp(seconds, datetime.UTC)


async def _shown(
    request: Request, service: Service, batch: Batch, requests: int | None = None
) -> MessageBatch:
    """A batch as Anthropic's `MessageBatch`: its status as theirs, its `requests` (counted as it is checked,
    else from its file) counted by how they ended."""
    from anthropic.types.messages import MessageBatch

    counts = batch.request_counts
    total, done, failed = (counts.total, counts.completed, counts.failed) if counts else (0, 0, 0)
    if batch.status == "validating":
        total = requests if requests is not None else len(await _records(service, batch.input_file_id))
    expired = 0
    if batch.status == "expired":  # the runner writes a `batch_expired` error for each line it did not run
        expired = sum(
            1
            for record in await _records(service, batch.error_file_id)
            if _failed(record)["type"] == "expired"
        )
    left = max(total - done - failed, 0)
    ended = batch.status in _ENDED
    identifier = _message_batch_id(batch.id)
    results = f"{str(request.base_url).rstrip('/')}/v1/messages/batches/{identifier}/results"
    return MessageBatch.model_validate(
        {
            "id": identifier,
            "type": "message_batch",
            "processing_status": _STATUS.get(batch.status, "in_progress"),
            "request_counts": {
                "processing": 0 if ended else left,
                "succeeded": done,
                "errored": failed - expired + (left if batch.status == "failed" else 0),
                "canceled": left if batch.status == "cancelled" else 0,
                "expired": expired,
            },
            "created_at": _time(batch.created_at),
            "expires_at": _time(batch.expires_at),
            "ended_at": _time(
                batch.completed_at or batch.failed_at or batch.expired_at or batch.cancelled_at
            ),
            "cancel_initiated_at": _time(batch.cancelling_at),
            "archived_at": None,
            "results_url": results if ended else None,
        }
    )
