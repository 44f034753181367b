"""The Realtime API's audio formats: 16-bit PCM at 24 kHz (`audio/pcm`), and G.711 μ-law and A-law at
8 kHz (`audio/pcmu`, `audio/pcma`). What comes in becomes 16 kHz float samples (what speech detection and
Whisper read); what goes out is made from the speech model's 24 kHz PCM. PyAV is imported by a session's
first audio, not with the server."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Literal

import numpy as np

from modelport.service.audio.codec import OUTPUT_RATE
from modelport.service.realtime.realtime_events import ClientEventError

if TYPE_CHECKING:
    import av
    from av.audio.codeccontext import AudioCodecContext

LISTEN_RATE = 16_000
RATES = {"audio/pcm": OUTPUT_RATE, "audio/pcmu": 8_000, "audio/pcma": 8_000}


# G.711 by FFmpeg's own codecs.
_G711: dict[str, Literal["pcm_mulaw", "pcm_alaw"]] = {"audio/pcmu": "pcm_mulaw", "audio/pcma": "pcm_alaw"}


def _g711(fmt: str, mode: Literal["r", "w"]) -> AudioCodecContext:
    import av

    codec = av.CodecContext.create(_G711[fmt], mode)
    codec.sample_rate, codec.layout = RATES[fmt], "mono"
    if mode == "w":
        codec.format = "s16"
    return codec


def _resampler(rate: int, sample_format: str = "flt") -> av.AudioResampler:
    import av

    return av.AudioResampler(format=sample_format, layout="mono", rate=rate)


def _samples(frames: list[av.AudioFrame], dtype: type[np.generic]) -> np.ndarray:
    """The samples of decoded or resampled mono frames, one array."""
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames]) if frames else np.zeros(0, dtype)


def _frame(samples: np.ndarray, rate: int) -> av.AudioFrame:
    import av

    frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = rate
    return frame


class Listener:
    """Base64 audio of one input format in, float32 samples at 16 kHz out (the resampler keeps its state
    across pieces); also the 16-bit samples as given, for the item that keeps the audio."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.rate = RATES[fmt]
        self._resampler = _resampler(LISTEN_RATE)
        self._decoder = _g711(fmt, "r") if fmt in _G711 else None

    def pcm16(self, data: str, param: str = "audio") -> np.ndarray:
        """The 16-bit samples that base64 `data` holds in this format."""
        import av

        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ClientEventError(f"'{param}' is not valid base64.", param=param) from None
        if self._decoder is not None:
            return _samples(self._decoder.decode(av.Packet(raw)) if raw else [], np.int16)
        if len(raw) % 2:
            raise ClientEventError(
                f"'{param}' holds {len(raw)} bytes: 16-bit PCM comes in whole 2-byte samples.", param=param
            )
        return np.frombuffer(raw, "<i2")

    def heard(self, samples: np.ndarray) -> np.ndarray:
        """16-bit samples of this format as float32 at 16 kHz."""
        if not len(samples):
            return np.zeros(0, np.float32)
        return _samples(self._resampler.resample(_frame(samples, self.rate)), np.float32)


class Speaker:
    """The speech model's 16-bit 24 kHz PCM in, base64 pieces of one output format out."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.rate = RATES[fmt]
        self._resampler = None if self.rate == OUTPUT_RATE else _resampler(self.rate, "s16")
        self._encoder = _g711(fmt, "w") if fmt in _G711 else None

    def encode(self, pcm: bytes) -> bytes:
        """`pcm` in this format (a resampled format holds a few samples back until `flush`)."""
        if self._resampler is None or not pcm:  # FFmpeg's resampler fails on an empty frame
            return pcm
        return self._coded(self._resampler.resample(_frame(np.frombuffer(pcm, "<i2"), OUTPUT_RATE)))

    def flush(self) -> bytes:
        """What the resampler held back."""
        return self._coded(self._resampler.resample(None)) if self._resampler is not None else b""

    def _coded(self, frames: list[av.AudioFrame]) -> bytes:
        assert self._encoder is not None
        return b"".join(bytes(packet) for frame in frames for packet in self._encoder.encode(frame))

    def seconds(self, encoded: bytes) -> float:
        """How long `encoded` bytes of this format play."""
        return len(encoded) / (2 if self._resampler is None else 1) / self.rate
