"""What the in-process clients take: SDK keyword arguments validated into request models (as the server
validates a body), an SDK `file` argument read into an upload, and the service a client runs."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, TypeVar

import openai
from pydantic import BaseModel

from modelport.errors import InvalidRequestError
from modelport.protocol.validation import parse
from modelport.service import Service, Upload
from modelport.settings import Settings

R = TypeVar("R", bound=BaseModel)

# Transport options of the SDK that have no meaning without HTTP.
_TRANSPORT = {"extra_headers", "extra_query", "timeout", "extra_body"}


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
