"""The routes of models, generation and embeddings, and vLLM's `/generate`: parse, call the service, render
the answer. Nothing else lives here."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from modelport.protocol.generate_request import GenerateRequest
from modelport.protocol.requests import ChatCompletionRequest, CompletionRequest, EmbeddingRequest
from modelport.server.http_render import json_body, render
from modelport.service import Service


def service_of(request: Request) -> Service:
    """The service the app was built with."""
    service: Service = request.app.state.service
    return service


router = APIRouter()
generate_router = APIRouter()


@router.get("/models")
async def list_models(request: Request, loaded: bool = False) -> Response:
    """List the served models (`?loaded=true`: only those loaded now, as `modelport ps` shows them)."""
    models = await service_of(request).list_models(loaded=loaded)
    return json_body({"object": "list", "data": [m.model_dump(mode="json") for m in models]})


@router.get("/models/{model_id:path}")
async def retrieve_model(request: Request, model_id: str) -> Response:
    """One model by id or alias."""
    return render(service_of(request).retrieve_model(model_id))


@router.post("/chat/completions")
async def chat_completions(request: Request, body: ChatCompletionRequest) -> Response:
    """Chat completion, whole or streamed as server-sent events."""
    return render(await service_of(request).chat_completion(body))


@router.post("/completions")
async def completions(request: Request, body: CompletionRequest) -> Response:
    """Legacy text completion, whole or streamed."""
    return render(await service_of(request).completion(body))


@router.post("/embeddings")
async def embeddings(request: Request, body: EmbeddingRequest) -> Response:
    """Embeddings, as floats or base64 little-endian float32."""
    return render(await service_of(request).embeddings(body))


@generate_router.post("/generate")
async def generate(request: Request, body: GenerateRequest) -> Response:
    """vLLM's demo endpoint: `{"text": [prompt + output, ...]}`, whole or as NUL-delimited frames of the
    text so far."""
    return render(await service_of(request).generate(body))
