"""The event kinds of the endpoints whose answers stream: how each one's events are typed in-process and
folded into its whole answer. They live beside the wire types because the operation table names them (what
a row answers), and the service's generation, audio and relays all make or check them."""

from __future__ import annotations

from typing import Any, TypeVar, cast

from openai.types import Completion
from openai.types.audio import Transcription, TranscriptionStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel, ValidationError

from modelport.protocol.answers import EventKind
from modelport.protocol.chunk_folds import ChatFold, CompletionFold
from modelport.protocol.sdk_private import loosely
from modelport.protocol.tagged_unions import by_type

M = TypeVar("M", bound=BaseModel)


def chunk(cls: type[Any], data: dict[str, Any]) -> Any:
    """One typed chunk. pydantic-core validates one in microseconds where `loosely` (the SDK's own way,
    which tolerates anything) takes ~20× longer, which a 2-core machine pays out of its decode rate. A
    legacy completion chunk's `finish_reason` is null until the end, which the strict type refuses: it is
    validated as "length" and set back."""
    open_choices = [
        c
        for c in data["choices"]
        if cls is Completion and isinstance(c, dict) and c.get("finish_reason") is None
    ]
    for choice in open_choices:
        choice["finish_reason"] = "length"
    try:
        typed = cls.model_validate(data)
    except ValidationError:
        typed = None
    for choice in open_choices:
        choice["finish_reason"] = None
    if typed is None:
        return loosely(cls, data)
    for model, raw in zip(typed.choices, data["choices"], strict=True):
        if raw.get("finish_reason") is None:
            model.finish_reason = None
    return typed


def one_of(kinds: dict[str, type[BaseModel]], union: Any, data: dict[str, Any]) -> Any:
    """An event of an `openai` union of types (`kinds`: its members by their `type`, `by_type`): validated
    as the member its `type` names, in microseconds; else built as loosely as the SDK builds what a server
    sent (the union tried member by member, ~140 µs an event warm, ~0.8 ms cold)."""
    kind = kinds.get(str(data.get("type")))
    if kind is not None:
        try:
            return kind.model_validate(data)
        except ValidationError:
            pass
    return loosely(union, data)


def loose(cls: type[M], data: dict[str, Any]) -> M:
    """A whole answer as its `openai` type: validated, or built as loosely as the SDK builds what a server
    sent (a scored prompt's first token has null log-probabilities, which the SDK's type calls floats)."""
    try:
        return cls.model_validate(data)
    except ValidationError:
        return cast(M, loosely(cls, data))


CHAT_CHUNKS: EventKind[ChatCompletion] = EventKind(
    "chat.completion.chunk",
    fold=ChatFold,
    event=lambda data: chunk(ChatCompletionChunk, data),
    whole=lambda data: loose(ChatCompletion, data),
    done=True,
)
COMPLETION_CHUNKS: EventKind[Completion] = EventKind(
    "text_completion",
    fold=CompletionFold,
    event=lambda data: chunk(Completion, data),
    whole=lambda data: loose(Completion, data),
    done=True,
)


# `speech.audio.delta` events, then `speech.audio.done` with the usage: the last one closes the answer.
SPEECH_EVENTS: EventKind[dict[str, Any]] = EventKind("speech.audio")
# `transcript.text.delta` events, then `transcript.text.done`, whose text is the whole transcript.
_TRANSCRIPT_TYPES = by_type(TranscriptionStreamEvent)
TRANSCRIPT_EVENTS: EventKind[Transcription] = EventKind(
    "transcript.text",
    event=lambda data: one_of(_TRANSCRIPT_TYPES, TranscriptionStreamEvent, data),
    whole=lambda done: Transcription.model_validate(
        {"text": done.get("text", ""), "usage": done.get("usage")}
    ),
    done=True,
)
