"""The voice pipeline's fixtures, shared by the realtime tests of both transports (WebSocket and WebRTC):
its models load once for the package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from modelport.settings import (
    DEFAULT_CHAT,
    DEFAULT_REALTIME,
    DEFAULT_SPEECH,
    DEFAULT_TRANSCRIPTION,
    AuthSettings,
    ModelConfig,
    Settings,
    StoreSettings,
)
from tests.support.faces import Faces, faces

QUESTION = "What is the weather like in Paris today?"


VOICE_MODELS = [
    ModelConfig(id=DEFAULT_CHAT, engine="llamacpp"),
    # Without Piper's variation: the question the tests ask is the same sound every run (drawn afresh, about
    # one in ten soundings was heard "pairs" for "Paris", and once "I can pair us" for "like in Paris").
    ModelConfig(id=DEFAULT_SPEECH, engine="piper", noise_scale=0, noise_w_scale=0),
    ModelConfig(id=DEFAULT_TRANSCRIPTION, engine="faster-whisper"),
    ModelConfig(id=DEFAULT_REALTIME, engine="realtime"),
]


def listening_settings(database: str, key_cache_seconds: float | None = None) -> Settings:
    """Transcription sessions only (Whisper and the realtime pipeline, no chat or speech model), storing in
    `database`, for the tests of keys and projects; keys checked again every `key_cache_seconds` if given."""
    models = [
        ModelConfig(id=DEFAULT_TRANSCRIPTION, engine="faster-whisper"),
        ModelConfig(id=DEFAULT_REALTIME, engine="realtime"),
    ]
    settings = Settings(defaults=False, models=models, store=StoreSettings(url=database))
    if key_cache_seconds is not None:
        settings.auth = AuthSettings(key_cache_seconds=key_cache_seconds)
    return settings


@pytest.fixture(scope="package")
def voice() -> Iterator[Faces]:
    """The realtime pipeline and the models it chains, behind both faces."""
    with faces(Settings(defaults=False, models=VOICE_MODELS)) as served:
        yield served


@pytest.fixture(scope="package")
def question(voice: Faces) -> bytes:
    """QUESTION, spoken by Piper: 16-bit PCM at 24 kHz."""
    return voice.inprocess.audio.speech.create(
        model="tts-1", voice="alloy", input=QUESTION, response_format="pcm"
    ).content
