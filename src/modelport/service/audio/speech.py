"""Speech: text → audio, sentence by sentence, whole or streamed as it is synthesised (or as OpenAI's
`speech.audio.*` events)."""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import numpy as np

from modelport.errors import InvalidRequestError, PredictorError
from modelport.predictors.contract import Predictor
from modelport.predictors.manager import LoadedModel
from modelport.protocol.answers import Binary, Events
from modelport.protocol.event_kinds import SPEECH_EVENTS
from modelport.protocol.requests import SpeechRequest
from modelport.service import calls
from modelport.service.audio import codec as audio_codec

OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse",
    "marin", "cedar",
)  # fmt: skip
_SENTENCE_END = re.compile(r"(?<=[.!?;:。！？])\s+|\n{2,}")
_MAX_PIECE = 400  # characters; longer sentences are cut at commas, then spaces


async def speech(
    model: LoadedModel, predictor: Predictor, request: SpeechRequest, *, whole: bool = False
) -> Binary | Events[dict[str, Any]]:
    """Synthesise `input` with `voice`, sentence by sentence, and encode it as `response_format`.

    Audio streams as it is synthesised unless `stream_format` is `sse` (events) or the caller asks for
    the `whole` file (the in-process `create`, whose WAV header can then carry exact sizes): OpenAI's
    default `stream_format` is `audio`, and an HTTP client cannot say that it will wait for the end.
    """
    voice = resolve_voice(predictor, request.voice)
    if request.speed != 1.0 and not predictor.accepts("openai.audio.speech.speed"):
        raise InvalidRequestError(f"The model `{model.spec.id}` does not support `speed`.", param="speed")
    pieces = _synthesised(model, predictor, split_sentences(request.input), voice, request.speed)
    assert predictor.sample_rate is not None
    if whole and request.stream_format != "sse":
        encoder = audio_codec.Encoder(request.response_format, predictor.sample_rate)
        async for pcm in pieces:
            await anyio.to_thread.run_sync(encoder.encode, pcm)
        content = await anyio.to_thread.run_sync(encoder.finish)
        return Binary(audio_codec.media_type(request.response_format), content)
    chunks = await calls.eager(_encoded(pieces, request.response_format, predictor.sample_rate))
    if request.stream_format != "sse":
        return Binary(audio_codec.media_type(request.response_format), chunks=chunks)
    return Events(_speech_events(chunks, len(request.input)), SPEECH_EVENTS)


def split_sentences(text: str) -> list[str]:
    """Pieces of at most ~400 characters, cut at sentence ends where possible."""
    pieces: list[str] = []
    for sentence in filter(None, (s.strip() for s in _SENTENCE_END.split(text))):
        while len(sentence) > _MAX_PIECE:
            cut = max(sentence.rfind(", ", 0, _MAX_PIECE), sentence.rfind(" ", 0, _MAX_PIECE))
            cut = cut if cut > 0 else _MAX_PIECE
            pieces.append(sentence[: cut + 1].strip())
            sentence = sentence[cut + 1 :].strip()
        if sentence:
            pieces.append(sentence)
    return pieces or [text]


def resolve_voice(predictor: Predictor, voice: str) -> str:
    """The model's own voice for `voice`; OpenAI's voice names map onto the model's voices in turn."""
    if voice in predictor.voices:
        return voice
    if voice in OPENAI_VOICES and predictor.voices:
        return predictor.voices[OPENAI_VOICES.index(voice) % len(predictor.voices)]
    raise InvalidRequestError(
        f"Unknown voice `{voice}`. Valid voices: {', '.join([*predictor.voices, *OPENAI_VOICES])}.",
        param="voice",
    )


async def _synthesised(
    model: LoadedModel, predictor: Predictor, pieces: list[str], voice: str, speed: float
) -> AsyncGenerator[np.ndarray, None]:
    options = {"openai.audio.speech.speed": speed}
    for piece in pieces:
        pcm = await calls.call(model, predictor, functools.partial(predictor, piece, options, voice))
        if not isinstance(pcm, np.ndarray) or pcm.dtype != np.float32 or pcm.ndim not in (1, 2):
            shown = (
                f"{pcm.dtype} array of shape {pcm.shape}"
                if isinstance(pcm, np.ndarray)
                else type(pcm).__name__
            )
            raise PredictorError(
                f"predictor `{predictor.name}` returned {shown}; expected float32 (F,) or (F, C)"
            )
        yield pcm


async def _encoded(
    pieces: AsyncGenerator[np.ndarray, None], fmt: str, sample_rate: int
) -> AsyncGenerator[bytes, None]:
    encoder = audio_codec.Encoder(fmt, sample_rate, streaming=True)
    try:
        async for pcm in pieces:
            ready = await anyio.to_thread.run_sync(encoder.encode, pcm)
            if ready:
                yield ready
        yield await anyio.to_thread.run_sync(encoder.finish)
    finally:
        await pieces.aclose()


async def _speech_events(
    chunks: AsyncGenerator[bytes, None], characters: int
) -> AsyncGenerator[dict[str, Any], None]:
    try:
        async for chunk in chunks:
            if chunk:
                yield {"type": "speech.audio.delta", "audio": base64.b64encode(chunk).decode()}
    finally:
        await chunks.aclose()
    # The engines have no tokenizer: input is counted in characters, output in none.
    yield {
        "type": "speech.audio.done",
        "usage": {"input_tokens": characters, "output_tokens": 0, "total_tokens": characters},
    }
