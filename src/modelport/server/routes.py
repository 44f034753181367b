"""The OpenAI routes: parse, call the service, frame the answer. Nothing else lives here."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ValidationError
from sse_starlette import EventSourceResponse

from modelport.errors import InvalidRequestError, ModelportError
from modelport.protocol.requests import (
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    SpeechRequest,
    TranscriptionFormat,
    TranscriptionRequest,
)
from modelport.server.errors import validation_param
from modelport.service import Service

log = logging.getLogger("modelport.server")


def service_of(request: Request) -> Service:
    """The service the app was built with."""
    service: Service = request.app.state.service
    return service


def _json(model: BaseModel) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json", warnings=False))


def _sse(chunks: AsyncGenerator[Any, None]) -> EventSourceResponse:
    async def events() -> AsyncIterator[dict[str, str]]:
        try:
            async for chunk in chunks:
                yield {"data": chunk.model_dump_json(exclude_unset=True)}
        except ModelportError as error:
            # Headers are gone: the error travels as a data frame, which the openai SDK raises as APIError.
            yield {"data": json.dumps(error.body())}
        finally:
            await chunks.aclose()  # a client that went away stops its generation here
        yield {"data": "[DONE]"}

    return EventSourceResponse(events(), ping=15)


router = APIRouter()


@router.get("/models")
async def list_models(request: Request) -> JSONResponse:
    """List the served models."""
    models = service_of(request).list_models()
    return JSONResponse({"object": "list", "data": [m.model_dump(mode="json") for m in models]})


@router.get("/models/{model_id:path}")
async def retrieve_model(request: Request, model_id: str) -> JSONResponse:
    """One model by id or alias."""
    return _json(service_of(request).retrieve_model(model_id))


@router.post("/chat/completions")
async def chat_completions(request: Request, body: ChatCompletionRequest) -> Response:
    """Chat completion, whole or streamed as server-sent events."""
    result = await service_of(request).chat_completion(body)
    return _sse(result) if isinstance(result, AsyncGenerator) else _json(result)


@router.post("/completions")
async def completions(request: Request, body: CompletionRequest) -> Response:
    """Legacy text completion, whole or streamed."""
    result = await service_of(request).completion(body)
    return _sse(result) if isinstance(result, AsyncGenerator) else _json(result)


@router.post("/embeddings")
async def embeddings(request: Request, body: EmbeddingRequest) -> JSONResponse:
    """Embeddings, as floats or base64 little-endian float32."""
    return _json(await service_of(request).embeddings(body))


@router.post("/audio/speech")
async def speech(request: Request, body: SpeechRequest) -> Response:
    """Text to speech; the body is the audio file."""
    audio = await service_of(request).speech(body)
    return Response(audio.content, media_type=audio.media_type)


@router.post("/audio/transcriptions")
async def transcriptions(
    request: Request,
    file: Annotated[UploadFile, File()],
    model: Annotated[str, Form()],
    language: Annotated[str | None, Form()] = None,
    prompt: Annotated[str | None, Form()] = None,
    response_format: Annotated[TranscriptionFormat, Form()] = "json",
    temperature: Annotated[float | None, Form()] = None,
    timestamp_granularities: Annotated[list[str] | None, Form(alias="timestamp_granularities[]")] = None,
    stream: Annotated[bool, Form()] = False,
) -> Response:
    """Speech to text from an uploaded audio file."""
    try:
        body = TranscriptionRequest.model_validate(
            {
                "model": model,
                "language": language,
                "prompt": prompt,
                "response_format": response_format,
                "temperature": temperature,
                "timestamp_granularities": timestamp_granularities,
                "stream": stream,
            }
        )
    except ValidationError as error:
        first = error.errors()[0]
        raise InvalidRequestError(
            f"Invalid value: {first['msg']}", param=validation_param(dict(first))
        ) from None
    result = await service_of(request).transcription(body, await file.read())
    return PlainTextResponse(result) if isinstance(result, str) else _json(result)
