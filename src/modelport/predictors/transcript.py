"""What a transcription predictor may return beyond plain text: timed segments and words."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Word:
    """One word and its time span in seconds."""

    word: str
    start: float
    end: float


@dataclass(frozen=True)
class Segment:
    """A stretch of speech with its text, times in seconds, and the decoder's confidence figures."""

    start: float
    end: float
    text: str
    avg_logprob: float = 0.0
    no_speech_prob: float = 0.0
    compression_ratio: float = 1.0
    temperature: float = 0.0
    tokens: list[int] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)


@dataclass(frozen=True)
class Transcript:
    """Segments (may be a lazy iterator, so they can stream) and the spoken language, if known."""

    segments: Iterable[Segment]
    language: str | None = None
