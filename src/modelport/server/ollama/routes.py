"""Ollama's routes: each translates its request (`chat_body`), calls the row it stands for as every face
does, and renders the answer in Ollama's shapes (`ollama_lines`, `ollama_models`). Those are the `ollama`
package's types, imported with the face's first request, and with the OpenAPI document (`answers`)."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncGenerator
from typing import Any

from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from openai.types import CreateEmbeddingResponse
from pydantic import BaseModel

from modelport.errors import InvalidRequestError
from modelport.protocol.answers import Events
from modelport.protocol.sent_as import renamed
from modelport.server.json_routes import json_router
from modelport.server.ollama.chat_body import RAW_SENT_AS, chat_sent_as, generate_sent_as, messages, sampling
from modelport.server.ollama.ollama_request import (
    ChatRequest,
    EmbeddingsRequest,
    EmbedRequest,
    GenerateRequest,
    ModelRequest,
    OllamaMessage,
    keep_alive_seconds,
)
from modelport.service import Service
from modelport.service.operation_table import OPERATIONS

# Ollama reads a body as JSON whatever its content type, and clients count on it (`json_routes`).
router = json_router("/api", any_content_type=True)  # where Ollama's apps send it
CHAT = OPERATIONS.by_name("chat.completions.create")
COMPLETION = OPERATIONS.by_name("completions.create")
EMBEDDING = OPERATIONS.by_name("embeddings.create")
NDJSON = "application/x-ndjson"


@router.post("/chat", response_class=Response, tags=["Ollama"])
async def chat(request: Request, given: ChatRequest) -> Response:
    """A chat turn: the assistant's message, streamed (NDJSON) unless `stream` is false."""
    from ollama import ChatResponse

    from modelport.server.ollama import ollama_lines

    service: Service = request.app.state.service
    started = time.monotonic()
    if not given.messages:
        return _json(
            await _load(service, given.model, given.keep_alive, ChatResponse, message=ollama_lines.empty())
        )
    body = {"model": given.model, "messages": messages(given.messages), **sampling(given)}
    if given.tools:
        body["tools"] = given.tools
    with renamed(chat_sent_as(given.messages)):
        answer = await CHAT.invoke(service, {}, body=body)
    assert isinstance(answer, Events)  # whole or not (`sampling`)
    if given.stream:
        after = functools.partial(_kept, service, given.model, given.keep_alive)
        return _streamed(ollama_lines.chat_lines(answer, given.model, started, after))
    whole = await ollama_lines.chat_whole(answer, given.model, started)
    await _kept(service, given.model, given.keep_alive)
    return _json(whole)


@router.post("/generate", response_class=Response, tags=["Ollama"])
async def generate(request: Request, given: GenerateRequest) -> Response:
    """A completion of `prompt` (under the model's template, unless `raw`): streamed unless `stream` is
    false."""
    from ollama import GenerateResponse

    from modelport.server.ollama import ollama_lines

    service: Service = request.app.state.service
    started = time.monotonic()
    if not given.prompt and not given.images:
        return _json(await _load(service, given.model, given.keep_alive, GenerateResponse, response=""))
    asked = sampling(given)
    if given.raw or given.suffix is not None:  # the prompt as it is (and what follows it): a completion
        asked.pop("reasoning_effort", None)
        if asked.pop("logprobs", False):  # a completion's: how many alternatives
            asked["logprobs"] = asked.pop("top_logprobs")
        shape = asked.pop("response_format", None)
        if shape is not None:  # `format` holds a completion as vLLM's `guided_json` does
            asked["guided_json"] = (
                shape["json_schema"]["schema"] if "json_schema" in shape else {"type": "object"}
            )
        body = {"model": given.model, "prompt": given.prompt, "suffix": given.suffix, **asked}
        completion = {k: v for k, v in body.items() if v is not None}
        with renamed(RAW_SENT_AS):
            answer = await COMPLETION.invoke(service, {}, body=completion)
    else:
        turn = OllamaMessage(role="user", content=given.prompt, images=given.images)
        system = [OllamaMessage(role="system", content=given.system)] if given.system else []
        body = {"model": given.model, "messages": messages([*system, turn]), **asked}
        with renamed(generate_sent_as(given)):
            answer = await CHAT.invoke(service, {}, body=body)
    assert isinstance(answer, Events)  # whole or not (`sampling`)
    if given.stream:
        after = functools.partial(_kept, service, given.model, given.keep_alive)
        return _streamed(ollama_lines.generate_lines(answer, given.model, started, after))
    whole = await ollama_lines.generate_whole(answer, given.model, started)
    await _kept(service, given.model, given.keep_alive)
    return _json(whole)


@router.post("/embed", response_class=Response, tags=["Ollama"])
async def embed(request: Request, given: EmbedRequest) -> Response:
    """Embeddings of `input` (one text or several)."""
    from ollama import EmbedResponse

    from modelport.server.ollama import ollama_lines

    service: Service = request.app.state.service
    started = time.monotonic()
    body = {"model": given.model, "input": given.input, "dimensions": given.dimensions}
    body["truncate"] = given.truncate
    answer = await EMBEDDING.invoke(service, {}, body={k: v for k, v in body.items() if v is not None})
    assert isinstance(answer, CreateEmbeddingResponse)
    await _kept(service, given.model, given.keep_alive)
    return _json(
        EmbedResponse(
            model=answer.model,
            created_at=ollama_lines.now(),
            embeddings=[list(map(float, item.embedding)) for item in answer.data],
            prompt_eval_count=answer.usage.prompt_tokens,
            total_duration=ollama_lines.nanoseconds(started),
        )
    )


@router.post("/embeddings", response_class=Response, tags=["Ollama"])
async def embeddings(request: Request, given: EmbeddingsRequest) -> Response:
    """The embedding of one `prompt` (Ollama's older endpoint)."""
    from ollama import EmbeddingsResponse

    service: Service = request.app.state.service
    answer = await EMBEDDING.invoke(service, {}, body={"model": given.model, "input": given.prompt})
    assert isinstance(answer, CreateEmbeddingResponse)
    await _kept(service, given.model, given.keep_alive)
    return _json(EmbeddingsResponse(embedding=list(map(float, answer.data[0].embedding))))


@router.get("/tags", response_class=Response, tags=["Ollama"])
async def tags(request: Request) -> Response:
    """The models the caller may use that Ollama's apps can: chat, completion and embedding models."""
    from modelport.server.ollama import ollama_models

    service: Service = request.app.state.service
    served = [m for m in await service.list_models() if ollama_models.abilities(m)]
    listed = [ollama_models.tagged(m, await service.describe_model(m.id)) for m in served]
    return _json(ollama_models.Tags(models=listed))


@router.get("/ps", response_class=Response, tags=["Ollama"])
async def running(request: Request) -> Response:
    """The models loaded now, and when each is unloaded if it stays idle."""
    from modelport.server.ollama import ollama_models

    service: Service = request.app.state.service
    loaded = [m for m in await service.list_models(loaded=True) if ollama_models.abilities(m)]
    listed = [ollama_models.running(m, await service.describe_model(m.id)) for m in loaded]
    return _json(ollama_models.Running(models=listed))


@router.post("/show", response_class=Response, tags=["Ollama"])
async def show(request: Request, given: ModelRequest) -> Response:
    """One model: its details and what it can do (Ollama's capability names)."""
    from modelport.server.ollama import ollama_models

    service: Service = request.app.state.service
    model = service.retrieve_model(given.named)
    return _json(ollama_models.shown(model, await service.describe_model(given.named)))


@router.get("/version", response_class=Response, tags=["Ollama"])
async def version() -> Response:
    """The Ollama API version these shapes follow."""
    from modelport.server.ollama import ollama_models

    return _json(ollama_models.Version(version=ollama_models.VERSION))


async def _managed_elsewhere(request: Request) -> Response:
    """Pulling, pushing, creating, copying and deleting models are `modelport pull` and `models.toml`'s."""
    action = request.url.path.rstrip("/").rsplit("/", 1)[-1]
    raise InvalidRequestError(
        f"/api/{action}: modelport's models are managed with `modelport pull` and `models.toml`, not through "
        "the Ollama API."
    )


for _path, _method in (
    ("/pull", "POST"),
    ("/push", "POST"),
    ("/create", "POST"),
    ("/copy", "POST"),
    ("/delete", "DELETE"),
):
    router.add_api_route(
        _path, _managed_elsewhere, methods=[_method], response_class=Response, tags=["Ollama"]
    )


async def _load(
    service: Service, model: str, keep_alive: Any, shape: type[BaseModel], **fields: Any
) -> BaseModel:
    """A request with nothing to generate: the model loaded (or, `keep_alive: 0`, unloaded), as Ollama
    does it. Without `keep_alive` the model keeps its configuration's (Ollama's own default, five minutes,
    would cut short a model this server keeps loaded)."""
    from modelport.server.ollama import ollama_lines

    if keep_alive is None:
        await service.load(model)
        reason = "load"
    else:
        seconds = keep_alive_seconds(keep_alive)
        await service.keep_alive(model, seconds)
        reason = "unload" if seconds == 0 else "load"
    named = service.retrieve_model(model).id
    return shape(model=named, created_at=ollama_lines.now(), done=True, done_reason=reason, **fields)


async def _kept(service: Service, model: str, keep_alive: Any) -> None:
    """A request's `keep_alive`, applied once its answer is made."""
    if keep_alive is not None:
        await service.keep_alive(model, keep_alive_seconds(keep_alive))


def _json(answer: BaseModel) -> Response:
    return Response(answer.model_dump_json(exclude_none=True, by_alias=True), media_type="application/json")


def _streamed(lines: AsyncGenerator[bytes, None]) -> StreamingResponse:
    return StreamingResponse(lines, media_type=NDJSON)


def answers() -> dict[str, type[BaseModel]]:
    """The routes' answers by path, for the OpenAPI document (`documented_answers`)."""
    from ollama import ChatResponse, EmbeddingsResponse, EmbedResponse, GenerateResponse, ShowResponse

    from modelport.server.ollama.ollama_models import Running, Tags, Version

    shapes: dict[str, type[BaseModel]] = {"chat": ChatResponse, "generate": GenerateResponse}
    shapes |= {"embed": EmbedResponse, "embeddings": EmbeddingsResponse, "show": ShowResponse}
    shapes |= {"tags": Tags, "ps": Running, "version": Version}
    return {f"{router.prefix}/{path}": shape for path, shape in shapes.items()}
