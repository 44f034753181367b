"""Transcriptions and translations: decode the upload, run the predictor, answer in any OpenAI format."""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import anyio
from openai.types.audio import Transcription, TranscriptionVerbose, Translation, TranslationVerbose

from modelport import metrics
from modelport.errors import InvalidRequestError, PayloadTooLargeError, PredictorError
from modelport.predictors.contract import Predictor
from modelport.predictors.manager import LoadedModel
from modelport.predictors.relay import Upload
from modelport.predictors.transcript import Segment, Transcript
from modelport.protocol.answers import Binary, Events
from modelport.protocol.event_kinds import TRANSCRIPT_EVENTS
from modelport.protocol.requests import TranscriptionRequest
from modelport.service import calls
from modelport.service.audio import codec as audio_codec
from modelport.settings import Limits

TEXT = "text/plain; charset=utf-8"  # `text`, `srt` and `vtt` answers
Transcribed = Transcription | TranscriptionVerbose | Binary | Events[Transcription]
Translated = Translation | TranslationVerbose | Binary | Events[Transcription]


def check_upload(upload: Upload, max_bytes: int) -> None:
    """A 413 for an upload over the bound, a 400 for an empty one."""
    if len(upload.content) > max_bytes:
        raise PayloadTooLargeError(
            f"The uploaded file is {len(upload.content)} bytes; the limit is {max_bytes} bytes.", param="file"
        )
    if not upload.content:
        raise InvalidRequestError("The uploaded file is empty.", param="file")


async def transcribe(
    model: LoadedModel, predictor: Predictor, request: TranscriptionRequest, upload: Upload, bounds: Limits
) -> Transcribed:
    """Decode the upload, run the model's transcription (or translation), answer in `response_format`."""
    if request.response_format == "diarized_json":
        raise InvalidRequestError(
            "response_format diarized_json tells who spoke when, which needs a diarization model; none is "
            "served here. Use json, verbose_json, text, srt or vtt.",
            param="response_format",
            code="unsupported_value",
        )
    assert predictor.sample_rate is not None
    rate, most = predictor.sample_rate, bounds.audio_seconds
    samples = await anyio.to_thread.run_sync(audio_codec.decode, upload.content, rate, most)
    duration = len(samples) / rate
    metrics.count_seconds(duration)
    options = {
        "openai.audio.transcriptions.language": request.language,
        "openai.audio.transcriptions.prompt": request.prompt,
        "openai.chat.completions.temperature": request.temperature,
        "openai.audio.transcriptions.timestamp_granularities": request.timestamp_granularities,
    }
    stream = await calls.eager(
        calls.iterate(model, predictor, lambda: _as_items(predictor(samples, options), predictor, duration))
    )
    if request.stream:
        return Events(_events(stream, duration), TRANSCRIPT_EVENTS)
    items = [item async for item in stream]
    language = items[0] if items and isinstance(items[0], str) else None
    segments = [item for item in items if isinstance(item, Segment)]
    return _formatted(request, segments, language, duration)


def _as_items(result: Any, predictor: Predictor, duration: float) -> Iterator[str | Segment | None]:
    """The language first, then the segments one by one (lazily, when the predictor yields them)."""
    if isinstance(result, str):
        yield None
        yield Segment(0.0, duration, result)
        return
    if not isinstance(result, Transcript):
        raise PredictorError(
            f"predictor `{predictor.name}` returned {type(result).__name__}; expected a str or a Transcript"
        )
    yield result.language
    for segment in result.segments:
        if not isinstance(segment, Segment):
            raise PredictorError(
                f"predictor `{predictor.name}` yielded {type(segment).__name__}, not a Segment"
            )
        yield segment


async def _events(
    items: AsyncGenerator[str | Segment | None, None], duration: float
) -> AsyncGenerator[dict[str, Any], None]:
    texts: list[str] = []
    try:
        async for item in items:
            if isinstance(item, Segment) and item.text:
                delta = item.text if texts else item.text.lstrip()
                texts.append(delta)
                yield {"type": "transcript.text.delta", "delta": delta}
    finally:
        await items.aclose()
    yield {"type": "transcript.text.done", "text": "".join(texts).strip(), "usage": _usage(duration)}


def translated(answer: Transcribed) -> Translated:
    """A translation's transcript as OpenAI types it: `Translation`, its text; `TranslationVerbose`, with the
    language, the duration and the segments (a translation has no usage or words in OpenAI's reference)."""
    if isinstance(answer, TranscriptionVerbose):
        return TranslationVerbose.model_validate(answer.model_dump(exclude={"usage", "words"}))
    if isinstance(answer, Transcription):
        return Translation(text=answer.text)
    return answer


def _usage(duration: float) -> dict[str, Any]:
    return {"type": "duration", "seconds": math.ceil(duration)}


def _formatted(
    request: TranscriptionRequest, segments: list[Segment], language: str | None, duration: float
) -> Transcription | TranscriptionVerbose | Binary:
    text = "".join(s.text for s in segments).strip()
    fmt = request.response_format
    if fmt == "text":
        return Binary(TEXT, text.encode())
    if fmt == "json":
        return Transcription.model_validate({"text": text, "usage": _usage(duration)})
    if fmt == "srt":
        return Binary(
            TEXT,
            "".join(
                f"{i}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{s.text.strip()}\n\n"
                for i, s in enumerate(segments, 1)
            ).encode(),
        )
    if fmt == "vtt":
        return Binary(
            TEXT,
            (
                "WEBVTT\n\n"
                + "".join(
                    f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{s.text.strip()}\n\n" for s in segments
                )
            ).encode(),
        )
    granularities = request.timestamp_granularities or ["segment"]
    verbose: dict[str, Any] = {
        "text": text,
        "language": _language_name(language),
        "duration": duration,
        "usage": _usage(duration),
    }
    if "segment" in granularities:
        verbose["segments"] = [
            {
                "id": i,
                "seek": int(s.start * 100),
                "start": s.start,
                "end": s.end,
                "text": s.text,
                "tokens": s.tokens,
                "temperature": s.temperature,
                "avg_logprob": s.avg_logprob,
                "compression_ratio": s.compression_ratio,
                "no_speech_prob": s.no_speech_prob,
            }
            for i, s in enumerate(segments)
        ]
    if "word" in granularities:
        verbose["words"] = [
            {"word": w.word.strip(), "start": w.start, "end": w.end} for s in segments for w in s.words
        ]
    return TranscriptionVerbose.model_validate(verbose)


def _clock(seconds: float, separator: str) -> str:
    millis = round(seconds * 1000)
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


# OpenAI's verbose_json names the language in English words, as Whisper's tokenizer does.
_LANGUAGES = {
    "en": "english", "zh": "chinese", "de": "german", "es": "spanish", "ru": "russian", "ko": "korean",
    "fr": "french", "ja": "japanese", "pt": "portuguese", "tr": "turkish", "pl": "polish", "ca": "catalan",
    "nl": "dutch", "ar": "arabic", "sv": "swedish", "it": "italian", "id": "indonesian", "hi": "hindi",
    "fi": "finnish", "vi": "vietnamese", "he": "hebrew", "uk": "ukrainian", "el": "greek", "ms": "malay",
    "cs": "czech", "ro": "romanian", "da": "danish", "hu": "hungarian", "ta": "tamil", "no": "norwegian",
    "th": "thai", "ur": "urdu", "hr": "croatian", "bg": "bulgarian", "lt": "lithuanian", "la": "latin",
}  # fmt: skip


def _language_name(code: str | None) -> str:
    return _LANGUAGES.get(code or "", code or "unknown")
