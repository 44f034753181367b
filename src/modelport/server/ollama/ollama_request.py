"""Ollama's requests, as its API reference defines them. Fields it does not use are accepted and ignored, as
Ollama itself does."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from modelport.errors import InvalidRequestError


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class Options(_Loose):
    """`options`: the sampling and length options a request may set (a model's others are its own)."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0, le=1)
    num_predict: int | None = None  # -1: no bound
    stop: list[str] | None = None
    seed: int | None = None
    repeat_penalty: float | None = Field(default=None, gt=0, le=10)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)


class Function(_Loose):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolCall(_Loose):
    function: Function


class OllamaMessage(_Loose):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    thinking: str | None = None
    images: list[str] | None = None  # base64
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = None


Format = Literal["json"] | dict[str, Any] | None
Think = bool | Literal["low", "medium", "high"] | None
KeepAlive = float | str | None


class _Generating(_Loose):
    model: str = Field(min_length=1)
    stream: bool = True
    format: Format = None
    options: Options | None = None
    keep_alive: KeepAlive = None
    think: Think = None
    logprobs: bool = False  # each token's log-probability, with its `top_logprobs` likeliest alternatives
    top_logprobs: int = Field(default=0, ge=0, le=20)

    @field_validator("think", mode="before")
    @classmethod
    def _think(cls, value: Any) -> Any:
        # One sentence for what the union's members would each refuse in their own words.
        if value is None or isinstance(value, bool) or value in ("low", "medium", "high"):
            return value
        raise InvalidRequestError(
            f"Invalid value for 'think': true, false, or an effort (low, medium or high), not {value!r}.",
            param="think",
        )


class ChatRequest(_Generating):
    """`POST /api/chat`; without messages, it loads (or, `keep_alive: 0`, unloads) the model."""

    messages: list[OllamaMessage] = Field(default_factory=list)
    tools: list[dict[str, Any]] | None = None


class GenerateRequest(_Generating):
    """`POST /api/generate`; without a prompt, it loads (or, `keep_alive: 0`, unloads) the model."""

    prompt: str = ""
    suffix: str | None = None
    system: str | None = None
    images: list[str] | None = None
    raw: bool = False


class EmbedRequest(_Loose):
    """`POST /api/embed`."""

    model: str = Field(min_length=1)
    input: str | list[str]
    dimensions: int | None = Field(default=None, ge=1)
    truncate: bool = True
    keep_alive: KeepAlive = None


class EmbeddingsRequest(_Loose):
    """`POST /api/embeddings` (the older one: one prompt, one embedding)."""

    model: str = Field(min_length=1)
    prompt: str
    keep_alive: KeepAlive = None


class ModelRequest(_Loose):
    """`POST /api/show` (`model`, or the older `name`)."""

    model: str | None = None
    name: str | None = None

    @property
    def named(self) -> str:
        """The model named."""
        if not (self.model or self.name):
            raise InvalidRequestError("model is required", param="model")
        return str(self.model or self.name)


# Seconds past which a keep_alive is forever (Go's durations, which Ollama's are, reach 292 years).
FOREVER_AFTER = 10 * 365 * 86400.0
_DURATION = re.compile(r"(-?\d+(?:\.\d+)?)(ms|s|m|h)?")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def keep_alive_seconds(given: KeepAlive) -> float | None:
    """Ollama's `keep_alive` (seconds, or a duration like `5m`; negative, or longer than anyone waits:
    forever) as seconds, None for forever; a 400 for anything else."""
    if isinstance(given, int | float):
        seconds = float(given)
    else:
        found = _DURATION.fullmatch(str(given).strip())
        if found is None:
            raise InvalidRequestError(
                f"keep_alive is a duration such as 5m or 30s, not {given!r}.", param="keep_alive"
            )
        seconds = float(found[1]) * _UNIT[found[2]]
    return seconds if math.isfinite(seconds) and 0 <= seconds <= FOREVER_AFTER else None
