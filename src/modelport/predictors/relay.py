"""Relay predictors: models served elsewhere, behind an OpenAI-compatible API (vLLM, llama-server, Ollama,
another modelport). Such a predictor takes the request body as the client sent it and answers in OpenAI's
wire shape; the service passes both through unchanged but for the model id, so every field an upstream
understands (vLLM's `guided_*`, Ollama's options) reaches it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from modelport.predictors.contract import Capability, Predictor


@dataclass(frozen=True)
class Upload:
    """The file of a transcription or translation request."""

    name: str
    content: bytes


@dataclass(frozen=True)
class JsonReply:
    """A whole JSON answer."""

    body: Any
    origin: str  # the upstream that answered, for error messages


@dataclass(frozen=True)
class EventReply:
    """Server-sent events, each `data` parsed from JSON, already started (the first one is in hand). It ends
    after the upstream's `[DONE]`; a stream that breaks off raises a `ModelportError` instead."""

    events: AsyncGenerator[dict[str, Any], None]
    origin: str


@dataclass(frozen=True)
class BytesReply:
    """A body relayed as it arrives (audio, plain text, subtitles), with its Content-Type."""

    chunks: AsyncGenerator[bytes, None]
    media_type: str
    origin: str


Reply = JsonReply | EventReply | BytesReply
RelayFunction = Callable[[dict[str, Any], Upload | None], Awaitable[Reply]]


def relay_predictor(fn: RelayFunction, capability: Capability, name: str) -> Predictor:
    """A checked predictor for a relay function: it takes `(body, upload)` and returns a `Reply`."""
    return Predictor(fn, name, capability, "body", relay=True)
