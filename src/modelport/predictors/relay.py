"""Relay predictors: models served elsewhere, behind an OpenAI-compatible API (vLLM, llama-server, Ollama,
another modelport) or on Ray replicas. A relay takes the request body as the client sent it and answers in
one of the three answer shapes, as the wire gave it; the service passes both through unchanged but for the
model id, so every field an upstream understands (vLLM's `guided_*`, Ollama's options) reaches it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from modelport.predictors.contract import Capability
from modelport.protocol.answers import Binary, Events


@dataclass(frozen=True)
class Upload:
    """The file of a transcription or translation request."""

    name: str
    content: bytes


@dataclass(frozen=True)
class Reply:
    """A relay's answer, begun: the JSON it answered with (parsed), its events (the first one already
    arrived), or its bytes; and who answered, for error messages. A stream that breaks off raises a
    `ModelportError` instead of ending."""

    answer: Any | Events[Any] | Binary
    origin: str


# The path of the operation below `/v1` (its row's), the body, the upload: the reply begun.
RelayFunction = Callable[[str, dict[str, Any], Upload | None], Awaitable[Reply]]


@dataclass(frozen=True)
class Relay:
    """A model's capability served elsewhere: `send(path, body, upload)` forwards a request of the
    operation at `path` and begins its answer. Dispatched by the service in one place, beside the checked
    predictors of local models."""

    send: RelayFunction
    name: str
    capability: Capability
    voices: tuple[str, ...] = ()  # a speech model's, when the other side says
