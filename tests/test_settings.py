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
    assert "tts-1" not in settings.all_aliases()
    assert settings.all_aliases()["whisper-1"] == "whisper-tiny-en"
