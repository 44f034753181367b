"""What both in-process clients share: SDK keyword arguments in, SDK objects and exceptions out."""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2  # the HTTP library of openai>=3, whose response objects its types wrap
import openai
from openai._legacy_response import HttpxBinaryResponseContent
from openai._models import construct_type
from openai.types.audio import (
    Transcription,
    TranscriptionStreamEvent,
    TranscriptionVerbose,
    Translation,
    TranslationVerbose,
)
from pydantic import BaseModel

from modelport.errors import InvalidRequestError, ModelportError
from modelport.protocol.validation import parse
from modelport.service import Service, SpeechAudio, SpeechEvents, SpeechStream, TranscriptEvents, Upload
from modelport.settings import Settings

R = TypeVar("R", bound=BaseModel)

# Transport options of the SDK that have no meaning without HTTP.
_TRANSPORT = {"extra_headers", "extra_query", "timeout", "extra_body"}

_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


def build_service(
    service: Service | None, settings: Settings | None, config: str | os.PathLike[str] | None, preload: bool
) -> Service:
    """The service a client runs: given, or from settings, a TOML file, or the defaults (loaded lazily)."""
    if service is not None:
        return service
    if settings is None:
        settings = Settings.from_toml(config) if config is not None else Settings()
        settings = settings.model_copy(update={"preload": preload})
    return Service.from_settings(settings)


def request(cls: type[R], params: dict[str, Any]) -> R:
    """Validate SDK-style keyword arguments into a request model, as the server validates a body."""
    extra = params.get("extra_body") or {}
    body = {k: v for k, v in params.items() if k not in _TRANSPORT and _given(v)}
    return parse(cls, {**body, **extra})


def _given(value: Any) -> bool:
    return not isinstance(value, openai.NotGiven | openai.Omit) and value is not openai.NOT_GIVEN


@contextmanager
def sdk_errors(path: str) -> Iterator[None]:
    """Raise our errors as the SDK's exception classes, exactly as if they had come over HTTP."""
    try:
        yield
    except ModelportError as error:
        raise to_sdk_error(error, path) from error


def to_sdk_error(error: ModelportError, path: str) -> openai.APIStatusError:
    """The `openai` exception the SDK would raise for this error's status and body."""
    body = error.body()
    response = httpx2.Response(
        error.status,
        json=body,
        headers=error.headers(),
        request=httpx2.Request("POST", f"http://modelport.in-process/v1{path}"),
    )
    cls = _STATUS_ERRORS.get(
        error.status, openai.InternalServerError if error.status >= 500 else openai.APIStatusError
    )
    return cls(f"Error code: {error.status} - {body}", response=response, body=body["error"])


def binary_response(content: bytes, media_type: str) -> HttpxBinaryResponseContent:
    """The SDK's own binary response type (`.content`, `.read()`, `.write_to_file()`, …), built locally."""
    response = httpx2.Response(200, content=content, headers={"content-type": media_type})
    return HttpxBinaryResponseContent(response)


async def speech_bytes(result: SpeechAudio | SpeechStream | SpeechEvents) -> tuple[bytes, str]:
    """The whole body the HTTP face would send for a speech result, and its Content-Type."""
    if isinstance(result, SpeechAudio):
        return result.content, result.media_type
    if isinstance(result, SpeechStream):
        return b"".join([chunk async for chunk in result.chunks]), result.media_type
    frames = [f"data: {json.dumps(event)}\n\n" async for event in result.events]
    return "".join(frames).encode(), "text/event-stream"


class StreamedSpeech:
    """Like the SDK's streamed binary response: audio bytes as they are synthesised."""

    def __init__(self, chunks: AsyncIterator[bytes], media_type: str) -> None:
        self._chunks = chunks
        self.headers = {"content-type": media_type}

    async def iter_bytes(self, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        """Each piece of audio as soon as it is encoded."""
        async for chunk in self._chunks:
            yield chunk

    async def read(self) -> bytes:
        """All the audio."""
        return b"".join([chunk async for chunk in self._chunks])

    async def stream_to_file(self, file: str | os.PathLike[str], *, chunk_size: int | None = None) -> None:
        """Write the audio to `file` as it arrives."""
        async with await anyio.open_file(file, "wb") as out:
            async for chunk in self._chunks:
                await out.write(chunk)

    async def close(self) -> None:
        """Stop the synthesis."""
        aclose = getattr(self._chunks, "aclose", None)
        if aclose is not None:
            await aclose()


async def speech_chunks(result: SpeechAudio | SpeechStream | SpeechEvents) -> StreamedSpeech:
    """A streamed view of any speech result."""
    if isinstance(result, SpeechStream):
        return StreamedSpeech(result.chunks, result.media_type)
    content, media_type = await speech_bytes(result)

    async def whole() -> AsyncIterator[bytes]:
        yield content

    return StreamedSpeech(whole(), media_type)


def transcript_events(events: TranscriptEvents) -> AsyncIterator[Any]:
    """The SDK's stream event objects for a streamed transcription."""

    async def typed() -> AsyncIterator[Any]:
        async for event in events.events:
            yield construct_type(type_=TranscriptionStreamEvent, value=event)

    return typed()


def as_translation(result: Any) -> Any:
    """A transcription answer re-typed as the SDK's translation types."""
    if isinstance(result, TranscriptionVerbose):
        return TranslationVerbose.model_validate(result.model_dump(exclude={"words", "usage"}))
    if isinstance(result, Transcription):
        return Translation(text=result.text)
    return result


def read_file(file: Any) -> Upload:
    """The name and bytes of an SDK `file` argument: a path, bytes, a file object, or a (name, content)
    tuple."""
    name = "audio"
    if isinstance(file, tuple):
        name, file = str(file[0]), file[1]
    if isinstance(file, bytes | bytearray | memoryview):
        return Upload(name, bytes(file))
    if isinstance(file, str | os.PathLike):
        return Upload(Path(file).name, Path(file).read_bytes())
    if isinstance(file, io.IOBase) or hasattr(file, "read"):
        data = file.read()
        name = Path(str(getattr(file, "name", name))).name
        return Upload(name, data.encode() if isinstance(data, str) else bytes(data))
    raise InvalidRequestError(f"Unsupported `file` argument of type {type(file).__name__}.", param="file")
