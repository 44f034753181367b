"""What the settings serve by default: the speech models only where their extra (GPL-3.0) is installed."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from modelport.settings import Settings


def test_without_the_piper_extra_no_speech_model_is_a_default(monkeypatch: pytest.MonkeyPatch) -> None:
    found = importlib.util.find_spec

    def hidden(name: str, *args: Any) -> Any:
        return None if name in ("piper", "espeakng_loader") else found(name, *args)

    with_extra = [m.id for m in Settings().all_models()]
    assert {"piper-en-us", "espeak-ng"} <= set(with_extra)
    monkeypatch.setattr(importlib.util, "find_spec", hidden)
    settings = Settings()
    assert [m.id for m in settings.all_models()] == [
        i for i in with_extra if i not in ("piper-en-us", "espeak-ng")
    ]
    assert settings.openai_target("tts-1") is None
    assert settings.openai_target("whisper-1") == "whisper-tiny-en"


@pytest.mark.parametrize(
    ("name", "reached"),
    [
        ("gpt-5.6-luna", "smollm2-135m-instruct"),  # the OpenAI Agents SDK's default
        ("gpt-5", "smollm2-135m-instruct"),
        ("gpt-5-nano", "smollm2-135m-instruct"),
        ("gpt-4o-2024-08-06", "smollm2-135m-instruct"),
        ("gpt-4.1-2025-04-14", "smollm2-135m-instruct"),
        ("gpt-audio-mini", "smollm2-135m-instruct"),
        ("gpt-4o-audio-preview-2024-12-17", "smollm2-135m-instruct"),
        ("o4-mini-2025-04-16", "smollm2-135m-instruct"),
        ("chatgpt-4o-latest", "smollm2-135m-instruct"),
        ("gpt-transcribe", "whisper-tiny-en"),  # the voice pipeline's default
        ("gpt-4o-mini-transcribe-2025-03-20", "whisper-tiny-en"),
        ("gpt-4o-mini-tts-2025-03-20", "piper-en-us"),
        ("tts-1-hd", "piper-en-us"),
        ("text-embedding-3-large", "all-minilm-l6-v2"),
        ("gpt-realtime-mini-2025-10-06", "realtime"),
        ("gpt-image-1", None),
        ("dall-e-3", None),
        ("omni-moderation-latest", None),
        ("mistral-7b", None),
    ],
)
def test_openai_s_model_names_reach_the_defaults_by_family(name: str, reached: str | None) -> None:
    assert Settings().openai_target(name) == reached
    assert Settings(openai_aliases=False).openai_target(name) is None
