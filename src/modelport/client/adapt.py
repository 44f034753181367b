"""What both in-process clients share: SDK keyword arguments in, SDK objects and exceptions out."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx2  # the HTTP library of openai>=3, whose response objects its types wrap
import openai
from openai._legacy_response import HttpxBinaryResponseContent
from pydantic import BaseModel, ValidationError

from modelport.errors import InvalidRequestError, ModelportError
from modelport.server.errors import validation_param
from modelport.service import Service, SpeechAudio
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
    try:
        return cls.model_validate({**body, **extra})
    except ValidationError as error:
        first = error.errors()[0]
        param = validation_param(dict(first))
        if first["type"] == "missing":
            raise InvalidRequestError(f"Missing required parameter: '{param}'.", param=param) from None
        raise InvalidRequestError(f"Invalid value for '{param}': {first['msg']}", param=param) from None


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
        error.status, json=body, request=httpx2.Request("POST", f"http://modelport.in-process/v1{path}")
    )
    cls = _STATUS_ERRORS.get(
        error.status, openai.InternalServerError if error.status >= 500 else openai.APIStatusError
    )
    return cls(f"Error code: {error.status} - {body}", response=response, body=body["error"])


def binary_response(audio: SpeechAudio) -> HttpxBinaryResponseContent:
    """The SDK's own binary response type (`.content`, `.read()`, `.write_to_file()`, …), built locally."""
    response = httpx2.Response(200, content=audio.content, headers={"content-type": audio.media_type})
    return HttpxBinaryResponseContent(response)


def read_file(file: Any) -> bytes:
    """The bytes of an SDK `file` argument: a path, bytes, a file object, or a (name, content) tuple."""
    if isinstance(file, tuple):
        file = file[1]
    if isinstance(file, bytes | bytearray | memoryview):
        return bytes(file)
    if isinstance(file, str | os.PathLike):
        return Path(file).read_bytes()
    if isinstance(file, io.IOBase) or hasattr(file, "read"):
        data = file.read()
        return data.encode() if isinstance(data, str) else bytes(data)
    raise InvalidRequestError(f"Unsupported `file` argument of type {type(file).__name__}.", param="file")
