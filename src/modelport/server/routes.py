"""The OpenAI routes: parse, call the service, frame the answer. Nothing else lives here."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel

from modelport.protocol.requests import (
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    SpeechRequest,
    TranscriptionFormat,
    TranscriptionRequest,
)
from modelport.protocol.validation import parse
from modelport.server.streaming import EventStream, frames
from modelport.service import Answer, Chunks, Service, SpeechEvents, SpeechStream, TranscriptEvents, Upload

log = logging.getLogger("modelport.server")


def service_of(request: Request) -> Service:
    """The service the app was built with."""
    service: Service = request.app.state.service
    return service


def _json(model: BaseModel) -> Response:
    return Response(model.model_dump_json(warnings=False), media_type="application/json")


def _answer(result: BaseModel | Chunks[Any]) -> Response:
    """A whole answer as JSON, a streamed one as server-sent events ending with `[DONE]`."""
    if isinstance(result, Chunks):
        return EventStream(frames(result.items, done=True))
    return _json(result)


async def _closing(chunks: AsyncGenerator[bytes, None]) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        await chunks.aclose()


router = APIRouter()


@router.get("/models")
async def list_models(request: Request, loaded: bool = False) -> JSONResponse:
    """List the served models (`?loaded=true`: only those loaded now, as `modelport ps` shows them)."""
    models = await service_of(request).list_models(loaded=loaded)
    return JSONResponse({"object": "list", "data": [m.model_dump(mode="json") for m in models]})


@router.get("/models/{model_id:path}")
async def retrieve_model(request: Request, model_id: str) -> Response:
    """One model by id or alias."""
    return _json(service_of(request).retrieve_model(model_id))


@router.post("/chat/completions")
async def chat_completions(request: Request, body: ChatCompletionRequest) -> Response:
    """Chat completion, whole or streamed as server-sent events."""
    return _answer(await service_of(request).chat_completion(body))


@router.post("/completions")
async def completions(request: Request, body: CompletionRequest) -> Response:
    """Legacy text completion, whole or streamed."""
    return _answer(await service_of(request).completion(body))


@router.post("/embeddings")
async def embeddings(request: Request, body: EmbeddingRequest) -> Response:
    """Embeddings, as floats or base64 little-endian float32."""
    return _json(await service_of(request).embeddings(body))


@router.post("/audio/speech")
async def speech(request: Request, body: SpeechRequest) -> Response:
    """Text to speech: the audio file, or audio chunks / SSE events as they are synthesised."""
    result = await service_of(request).speech(body)
    if isinstance(result, SpeechStream):
        return StreamingResponse(_closing(result.chunks), media_type=result.media_type)
    if isinstance(result, SpeechEvents):
        return EventStream(frames(result.events, done=False))
    return Response(result.content, media_type=result.media_type)


@router.get("/audio/voices")
async def voices(request: Request, model: str) -> JSONResponse:
    """The voices of a speech model (OpenAI's voice names are accepted too and map onto these)."""
    names = await service_of(request).voices(model)
    resolved = service_of(request).retrieve_model(model).id
    return JSONResponse(
        {"object": "list", "data": [{"id": v, "object": "voice", "model": resolved} for v in names]}
    )


class _AudioForm:
    """The multipart fields shared by transcriptions and translations."""

    def __init__(
        self,
        file: Annotated[UploadFile, File()],
        model: Annotated[str, Form()],
        language: Annotated[str | None, Form()] = None,
        prompt: Annotated[str | None, Form()] = None,
        response_format: Annotated[TranscriptionFormat, Form()] = "json",
        temperature: Annotated[float | None, Form()] = None,
        timestamp_granularities: Annotated[list[str] | None, Form(alias="timestamp_granularities[]")] = None,
        stream: Annotated[bool, Form()] = False,
    ) -> None:
        self.file = file
        self.fields = {
            "model": model,
            "language": language,
            "prompt": prompt,
            "response_format": response_format,
            "temperature": temperature,
            "timestamp_granularities": timestamp_granularities,
            "stream": stream,
        }

    async def upload(self) -> Upload:
        return Upload(self.file.filename or "audio", await self.file.read())

    def request(self) -> TranscriptionRequest:
        return parse(TranscriptionRequest, self.fields)


def _transcript_response(result: Answer) -> Response:
    if isinstance(result, TranscriptEvents):
        return EventStream(frames(result.events, done=True))
    if isinstance(result, str):
        return PlainTextResponse(result)
    return _json(result)


@router.post("/audio/transcriptions")
async def transcriptions(request: Request, form: Annotated[_AudioForm, Depends()]) -> Response:
    """Speech to text from an uploaded audio file."""
    result = await service_of(request).transcription(form.request(), await form.upload())
    return _transcript_response(result)


@router.post("/audio/translations")
async def translations(request: Request, form: Annotated[_AudioForm, Depends()]) -> Response:
    """Speech in any language to English text (models that can translate)."""
    result = await service_of(request).translation(form.request(), await form.upload())
    return _transcript_response(result)
