"""The models as Ollama's listings show them: `/api/tags`, `/api/ps`, `/api/show` and `/api/version`, with
Ollama's capability names for what each model can do."""

from __future__ import annotations

import datetime
import functools
from typing import Any

from ollama import ListResponse, ProcessResponse, ShowResponse
from openai.types import Model
from pydantic import BaseModel

from modelport.server.ollama.ollama_request import FOREVER_AFTER

# The Ollama API version whose shapes these are (clients check it before using newer fields).
VERSION = "0.13.0"


class TaggedModel(ListResponse.Model):
    """A model of `/api/tags`: Ollama's, with the `name` its apps read beside `model`."""

    name: str


class RunningModel(ProcessResponse.Model):
    """A model of `/api/ps`."""

    name: str


class Tags(BaseModel):
    """`/api/tags` (Ollama's `ListResponse`, its models with their `name`)."""

    models: list[TaggedModel]


class Running(BaseModel):
    """`/api/ps` (Ollama's `ProcessResponse`, its models with their `name`)."""

    models: list[RunningModel]


class Version(BaseModel):
    version: str


def tagged(model: Model, info: dict[str, Any]) -> TaggedModel:
    """A model as `/api/tags` lists it (`info`: what its files say it is)."""
    return TaggedModel.model_validate(
        {
            "name": model.id,
            "model": model.id,
            "modified_at": _created(model),
            "size": _size(model),
            "digest": "",
            "details": _details(model, info),
        }
    )


def running(model: Model, info: dict[str, Any]) -> RunningModel:
    """A loaded model as `/api/ps` lists it (`info`: what its files say it is)."""
    return RunningModel.model_validate(
        {
            "name": model.id,
            "model": model.id,
            "size": _size(model),
            "size_vram": 0,
            "digest": "",
            "details": _details(model, info),
            "expires_at": _expiry(model),
        }
    )


def shown(model: Model, info: dict[str, Any]) -> ShowResponse:
    """A model as `/api/show` tells of it, with what its files say it is (`info`, a GGUF's header)."""
    return ShowResponse.model_validate(
        {
            "modified_at": _created(model),
            "details": _details(model, info),
            "capabilities": abilities(model),
            "model_info": info,
            "parameters": "",
            "template": "",
        }
    )


def abilities(model: Model) -> list[str]:
    """What a model can do, in Ollama's capability names (none for what Ollama's apps cannot use)."""
    held = set(getattr(model, "capabilities", None) or ())
    names = []
    if held & {"chat", "completion"}:
        names.append("completion")
    if "chat" in held:
        names += ["tools", "thinking"] if "think" in str(getattr(model, "chat_format", "")) else ["tools"]
    if getattr(model, "fill_in_the_middle", False):  # a `suffix` completes (FIM clients look for it)
        names.append("insert")
    if "vision" in held:
        names.append("vision")
    if "embedding" in held:
        names.append("embedding")
    return names


def _details(model: Model, info: dict[str, Any]) -> dict[str, str]:
    """Ollama's `details` (its `ModelDetails`, which the package keeps private: validated from this), with
    its architecture as the family and the parameters' count as its apps show it ("135M", "3.2B") where
    the model's file says them, and its quantization ("Q4_1")."""
    chat = "chat" in (getattr(model, "capabilities", None) or ())
    details = {
        "format": "gguf" if chat else "",
        "family": str(info.get("general.architecture", model.owned_by)),
    }
    count = info.get("general.parameter_count")
    if isinstance(count, int) and count > 0:
        details["parameter_size"] = f"{count / 1e9:.1f}B" if count >= 10**9 else f"{count / 1e6:.0f}M"
    quantized = info.get("general.file_type")
    if isinstance(quantized, int) and quantized in _file_types():
        details["quantization_level"] = _file_types()[quantized]
    return details


@functools.cache
def _file_types() -> dict[int, str]:
    """llama.cpp's file types by their number in a GGUF's header, as Ollama names them ("Q4_K_M", "F16").
    Made at the first look, not with the server: `gguf` is a twentieth of the server's own import."""
    import gguf

    return {
        kind.value: kind.name.removeprefix("MOSTLY_").removeprefix("ALL_")
        for kind in gguf.LlamaFileType
        if kind is not gguf.LlamaFileType.GUESSED
    }


def _created(model: Model) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(model.created, datetime.UTC)


def _size(model: Model) -> int:
    return int(getattr(model, "memory_bytes", 0) or 0)


def _expiry(model: Model) -> datetime.datetime | None:
    keep_alive, idle = getattr(model, "keep_alive", None), getattr(model, "idle_seconds", 0.0)
    if not isinstance(keep_alive, int | float) or keep_alive - idle > FOREVER_AFTER:
        return None  # kept until unloaded (a time that far off is past what a date can say)
    return datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=max(0.0, keep_alive - idle))
