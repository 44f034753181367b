"""What the in-process clients take: an SDK `file` argument read into an upload, and the service a client
runs."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from modelport.errors import InvalidRequestError
from modelport.service import Service, Upload
from modelport.settings import Settings


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
