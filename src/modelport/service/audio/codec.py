"""Audio decoding (any upload PyAV reads) and encoding (OpenAI's speech formats) with FFmpeg's libraries.
PyAV is imported by the first audio decoded or encoded, not with the server."""

from __future__ import annotations

import io
import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from modelport.errors import InvalidRequestError

if TYPE_CHECKING:
    import av

OUTPUT_RATE = 24_000  # OpenAI's speech output rate, and the rate of its raw `pcm` format


@dataclass(frozen=True)
class _Format:
    container: str | None
    codec: str
    media_type: str
    sample_format: str
    options: dict[str, str] | None = None


FORMATS: dict[str, _Format] = {
    "wav": _Format("wav", "pcm_s16le", "audio/wav", "s16"),
    "pcm": _Format(None, "pcm_s16le", "audio/pcm", "s16"),
    "flac": _Format("flac", "flac", "audio/flac", "s16"),
    "mp3": _Format("mp3", "libmp3lame", "audio/mpeg", "s16p"),
    "aac": _Format("adts", "aac", "audio/aac", "fltp"),
    # Ogg pages of 100 ms instead of 1 s, so a stream's first audio is not held back.
    "opus": _Format("ogg", "libopus", "audio/ogg", "s16", {"page_duration": "100000"}),
}


def media_type(fmt: str) -> str:
    """The Content-Type OpenAI sends for a speech format."""
    return FORMATS[fmt].media_type


def decode(data: bytes, sample_rate: int, max_seconds: float = math.inf) -> np.ndarray:
    """Decode any audio file to float32 mono at `sample_rate`; a 400 naming `file` if it is not audio, or
    as soon as it has given more than `max_seconds` of audio: a few MB of FLAC can hold days of silence,
    tens of GB once decoded, so its length is known only by decoding, and decoding stops at the bound."""
    import av

    most = max_seconds * sample_rate
    try:
        with av.open(io.BytesIO(data), "r") as container:
            if not container.streams.audio:
                raise InvalidRequestError("The uploaded file has no audio stream.", param="file")
            resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
            pieces: list[np.ndarray] = []
            count = 0
            # `None` last: the samples the resampler still holds.
            for frame in itertools.chain(container.decode(container.streams.audio[0]), [None]):
                for out in resampler.resample(frame):
                    pieces.append(out.to_ndarray().reshape(-1))
                    count += len(pieces[-1])
                if count > most:
                    raise InvalidRequestError(
                        f"The audio is longer than this server takes: {max_seconds:.0f} s at most.",
                        param="file",
                        code="audio_too_long",
                    )
    except InvalidRequestError:
        raise
    except (av.FFmpegError, ValueError, IndexError) as error:
        raise InvalidRequestError(
            f"The uploaded file could not be decoded as audio: {error}", param="file"
        ) from error
    if not pieces:
        raise InvalidRequestError("The uploaded file contains no audio samples.", param="file")
    return np.concatenate(pieces).astype(np.float32, copy=False)


class Encoder:
    """Encodes float32 PCM pieces ((F,) or (F, C)) into one of OpenAI's speech formats, mono at 24 kHz.

    With `streaming`, each `encode` returns the bytes ready so far and the container is written as a
    stream (a WAV header then carries unknown sizes, as in any streamed WAV); without it, everything
    comes from `finish`, with exact headers.
    """

    def __init__(self, fmt: str, input_rate: int, *, streaming: bool = False) -> None:
        import av

        self.spec = FORMATS[fmt]
        self.input_rate = input_rate
        self._resampler = av.AudioResampler(format=self.spec.sample_format, layout="mono", rate=OUTPUT_RATE)
        self._sink: _StreamSink | io.BytesIO = _StreamSink() if streaming else io.BytesIO()
        self._raw: list[bytes] = []
        self._container: av.container.OutputContainer | None = None
        if self.spec.container is not None:
            self._container = av.open(self._sink, "w", format=self.spec.container, options=self.spec.options)
            self._stream = cast(
                av.audio.stream.AudioStream,
                self._container.add_stream(self.spec.codec, rate=OUTPUT_RATE, layout="mono"),
            )
            self._fifo = av.AudioFifo()
            self._frame_size = self._stream.codec_context.frame_size or 1024

    def encode(self, pcm: np.ndarray) -> bytes:
        """Add a piece; return the bytes that are ready (always empty unless streaming)."""
        import av

        mono = pcm.mean(axis=1) if pcm.ndim == 2 else pcm
        if not mono.size:  # a piece spoken as nothing ("..."): FFmpeg's resampler fails on an empty frame
            return self._take()
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(mono, np.float32)[None, :], format="flt", layout="mono"
        )
        frame.sample_rate = self.input_rate
        self._write(self._resampler.resample(frame), final=False)
        return self._take()

    def finish(self) -> bytes:
        """Flush everything; return the remaining bytes (the whole file unless streaming)."""
        self._write(self._resampler.resample(None), final=True)
        if self._container is not None:
            self._container.close()
        if isinstance(self._sink, io.BytesIO):
            return self._sink.getvalue() if self._container is not None else b"".join(self._raw)
        return self._take()

    def _write(self, frames: list[av.AudioFrame], *, final: bool) -> None:
        if self._container is None:  # raw little-endian 16-bit samples
            self._raw.extend(f.to_ndarray().astype("<i2").tobytes() for f in frames)
            return
        for f in frames:
            f.pts = None
            self._fifo.write(f)
        while self._fifo.samples >= self._frame_size or (final and self._fifo.samples):
            chunk = self._fifo.read(min(self._frame_size, self._fifo.samples))
            self._container.mux(self._stream.encode(chunk))
        if final:
            self._container.mux(self._stream.encode(None))

    def _take(self) -> bytes:
        if isinstance(self._sink, _StreamSink):
            if self._container is None:
                ready, self._raw = b"".join(self._raw), []
                return ready
            return self._sink.take()
        return b""


class _StreamSink:
    """A write-only file: FFmpeg sees it cannot seek and writes the container as a stream."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        ready, self._parts = b"".join(self._parts), []
        return ready


def encode(pcm: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """Encode a whole clip as one of OpenAI's speech formats, mono at 24 kHz."""
    encoder = Encoder(fmt, sample_rate)
    encoder.encode(pcm)
    return encoder.finish()
