"""The routes over stored state: stored chat completions and the Responses API. Parse, call the service,
render the answer; the store is the service's."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from modelport.protocol.requests import MetadataUpdate
from modelport.protocol.response_request import ResponseRequest
from modelport.server.http_render import render
from modelport.server.routes import service_of

router = APIRouter()


def _metadata_filter(request: Request) -> dict[str, str]:
    """`metadata[key]=value` query parameters."""
    return {
        key[len("metadata[") : -1]: value
        for key, value in request.query_params.items()
        if key.startswith("metadata[") and key.endswith("]")
    }


@router.get("/chat/completions")
async def list_chat_completions(
    request: Request,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    model: str | None = None,
) -> Response:
    """Stored chat completions, oldest first; `metadata[key]=value` filters."""
    page = await service_of(request).stored.list(
        after=after, limit=limit, order=order, model=model, metadata=_metadata_filter(request)
    )
    return render(page)


@router.get("/chat/completions/{completion_id}")
async def retrieve_chat_completion(request: Request, completion_id: str) -> Response:
    """A stored chat completion, with its metadata and input messages."""
    return render(await service_of(request).stored.retrieve(completion_id))


@router.get("/chat/completions/{completion_id}/messages")
async def chat_completion_messages(
    request: Request,
    completion_id: str,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> Response:
    """The messages of a stored chat completion's request."""
    return render(
        await service_of(request).stored.messages(completion_id, after=after, limit=limit, order=order)
    )


@router.post("/chat/completions/{completion_id}")
async def update_chat_completion(request: Request, completion_id: str, body: MetadataUpdate) -> Response:
    """Replace a stored chat completion's metadata."""
    return render(await service_of(request).stored.update(completion_id, body.metadata))


@router.delete("/chat/completions/{completion_id}")
async def delete_chat_completion(request: Request, completion_id: str) -> Response:
    """Delete a stored chat completion."""
    return render(await service_of(request).stored.delete(completion_id))


@router.post("/responses")
async def create_response(request: Request, body: ResponseRequest) -> Response:
    """A model response: whole, streamed as typed events, or queued in the background."""
    return render(await service_of(request).responses.create(body))


@router.get("/responses/{response_id}")
async def retrieve_response(
    request: Request, response_id: str, stream: bool = False, starting_after: int | None = None
) -> Response:
    """A stored response; with `stream=true`, its events (after `starting_after`)."""
    return render(await service_of(request).responses.retrieve(response_id, stream, starting_after))


@router.delete("/responses/{response_id}")
async def delete_response(request: Request, response_id: str) -> Response:
    """Delete a stored response."""
    return render(await service_of(request).responses.delete(response_id))


@router.post("/responses/{response_id}/cancel")
async def cancel_response(request: Request, response_id: str) -> Response:
    """Cancel a background response."""
    return render(await service_of(request).responses.cancel(response_id))


@router.get("/responses/{response_id}/input_items")
async def response_input_items(
    request: Request,
    response_id: str,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> Response:
    """The input items of a stored response."""
    return render(
        await service_of(request).responses.input_items(response_id, after=after, limit=limit, order=order)
    )
