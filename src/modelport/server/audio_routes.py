"""The audio routes: speech, voices, transcriptions and translations. Parse (an upload's multipart form),
call the service, render the answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import Response

from modelport.protocol.requests import SpeechRequest, TranscriptionFormat, TranscriptionRequest
from modelport.protocol.validation import parse
from modelport.server.http_render import json_body, render
from modelport.server.routes import service_of
from modelport.service import Upload

router = APIRouter()


@router.post("/audio/speech")
async def speech(request: Request, body: SpeechRequest) -> Response:
    """Text to speech: audio chunks (or SSE events) as they are synthesised."""
    return render(await service_of(request).speech(body))


@router.get("/audio/voices")
async def voices(request: Request, model: str) -> Response:
    """The voices of a speech model (OpenAI's voice names are accepted too and map onto these)."""
    names = await service_of(request).voices(model)
    resolved = service_of(request).retrieve_model(model).id
    data = [{"id": voice, "object": "voice", "model": resolved} for voice in names]
    return json_body({"object": "list", "data": data})


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


@router.post("/audio/transcriptions")
async def transcriptions(request: Request, form: Annotated[_AudioForm, Depends()]) -> Response:
    """Speech to text from an uploaded audio file."""
    return render(await service_of(request).transcription(form.request(), await form.upload()))


@router.post("/audio/translations")
async def translations(request: Request, form: Annotated[_AudioForm, Depends()]) -> Response:
    """Speech in any language to English text (models that can translate)."""
    return render(await service_of(request).translation(form.request(), await form.upload()))
