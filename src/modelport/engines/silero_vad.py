"""Silero VAD (v6, the ONNX model faster-whisper ships): the probability that each 32 ms window of 16 kHz
audio holds speech, window by window as audio streams in. One ONNX session per process (~0.08 ms a
window on one thread); each stream keeps its own recurrent state."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnxruntime

RATE = 16_000
WINDOW = 512  # samples: 32 ms
_CONTEXT = 64  # samples of the previous window the model reads before each one


@functools.cache
def _session() -> onnxruntime.InferenceSession:
    # Imported by the first session that listens, not with the server: the style's rule for a backend.
    import onnxruntime
    from faster_whisper.utils import get_assets_path

    options = onnxruntime.SessionOptions()
    options.inter_op_num_threads = options.intra_op_num_threads = 1
    options.log_severity_level = 4
    path = os.path.join(get_assets_path(), "silero_vad_v6.onnx")
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"], sess_options=options)


class SpeechDetector:
    """Speech probabilities of one audio stream, a window at a time."""

    def __init__(self) -> None:
        self.session = _session()
        self.reset()

    def reset(self) -> None:
        """Forget the stream so far."""
        self._h = np.zeros((1, 1, 128), np.float32)
        self._c = np.zeros((1, 1, 128), np.float32)
        self._context = np.zeros(_CONTEXT, np.float32)
        self._pending = np.zeros(0, np.float32)

    def feed(self, samples: np.ndarray) -> list[float]:
        """Take float32 mono samples at 16 kHz; the speech probability of each window they completed."""
        self._pending = np.concatenate([self._pending, samples.astype(np.float32, copy=False)])
        probabilities = []
        while len(self._pending) >= WINDOW:
            window, self._pending = self._pending[:WINDOW], self._pending[WINDOW:]
            framed = np.concatenate([self._context, window])[None, :]
            out, self._h, self._c = self.session.run(None, {"input": framed, "h": self._h, "c": self._c})
            self._context = window[-_CONTEXT:]
            probabilities.append(float(out.reshape(-1)[0]))
        return probabilities
