"""Speech (text → audio file) and transcription (audio file → text)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import anyio
import numpy as np
from openai.types.audio import Transcription

from modelport.errors import InvalidRequestError, PayloadTooLargeError, PredictorError
from modelport.predictors.contract import Capability, Predictor
from modelport.predictors.manager import ModelManager
from modelport.protocol.requests import SpeechRequest, TranscriptionRequest
from modelport.service import audio_codec, calls

OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse",
    "marin", "cedar",
)  # fmt: skip


@dataclass(frozen=True)
class SpeechAudio:
    """An encoded speech file and its Content-Type."""

    content: bytes
    media_type: str


async def speech(manager: ModelManager, request: SpeechRequest) -> SpeechAudio:
    """Synthesise `input` with `voice` and encode it as `response_format`."""
    if request.stream_format == "sse":
        raise InvalidRequestError(
            "stream_format `sse` is not supported yet; use `audio`.", param="stream_format"
        )
    model = await manager.get(request.model)
    predictor = model.predictor(Capability.SPEECH)
    voice = resolve_voice(predictor, request.voice)
    if request.speed != 1.0 and not predictor.accepts("openai.audio.speech.speed"):
        raise InvalidRequestError(f"The model `{model.spec.id}` does not support `speed`.", param="speed")
    pcm = await calls.call(
        model,
        predictor,
        lambda: predictor(request.input, {"openai.audio.speech.speed": request.speed}, voice),
    )
    if not isinstance(pcm, np.ndarray) or pcm.dtype != np.float32 or pcm.ndim not in (1, 2):
        shown = (
            f"{pcm.dtype} array of shape {pcm.shape}" if isinstance(pcm, np.ndarray) else type(pcm).__name__
        )
        raise PredictorError(
            f"predictor `{predictor.name}` returned {shown}; expected float32 (F,) or (F, C)"
        )
    assert predictor.sample_rate is not None
    rate = predictor.sample_rate
    content = await anyio.to_thread.run_sync(audio_codec.encode, pcm, rate, request.response_format)
    return SpeechAudio(content, audio_codec.media_type(request.response_format))


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


async def transcription(
    manager: ModelManager, request: TranscriptionRequest, audio_file: bytes, max_bytes: int
) -> Transcription | str:
    """Decode the upload, transcribe it, and answer in `response_format`."""
    if len(audio_file) > max_bytes:
        raise PayloadTooLargeError(
            f"The uploaded file is {len(audio_file)} bytes; the limit is {max_bytes} bytes.", param="file"
        )
    if request.response_format not in ("json", "text"):
        raise InvalidRequestError(
            f"response_format `{request.response_format}` is not supported yet; use `json` or `text`.",
            param="response_format",
        )
    if request.stream:
        raise InvalidRequestError("Streaming transcription is not supported yet.", param="stream")
    model = await manager.get(request.model)
    predictor = model.predictor(Capability.TRANSCRIPTION)
    assert predictor.sample_rate is not None
    samples = await anyio.to_thread.run_sync(audio_codec.decode, audio_file, predictor.sample_rate)
    text = await calls.call(
        model,
        predictor,
        lambda: predictor(
            samples,
            {
                "openai.audio.transcriptions.language": request.language,
                "openai.audio.transcriptions.prompt": request.prompt,
                "openai.chat.completions.temperature": request.temperature,
            },
        ),
    )
    if not isinstance(text, str):
        raise PredictorError(
            f"predictor `{predictor.name}` returned {type(text).__name__}; expected the text, a str"
        )
    if request.response_format == "text":
        return text
    seconds = len(samples) / predictor.sample_rate
    return Transcription.model_validate(
        {"text": text, "usage": {"type": "duration", "seconds": math.ceil(seconds)}}
    )
