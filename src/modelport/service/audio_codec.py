"""Audio decoding (any upload PyAV reads) and encoding (OpenAI's speech formats) with FFmpeg's libraries."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import cast

import av
import numpy as np

from modelport.errors import InvalidRequestError

OUTPUT_RATE = 24_000  # OpenAI's speech output rate, and the rate of its raw `pcm` format


@dataclass(frozen=True)
class _Format:
    container: str | None
    codec: str
    media_type: str
    sample_format: str


FORMATS: dict[str, _Format] = {
    "wav": _Format("wav", "pcm_s16le", "audio/wav", "s16"),
    "pcm": _Format(None, "pcm_s16le", "audio/pcm", "s16"),
    "flac": _Format("flac", "flac", "audio/flac", "s16"),
    "mp3": _Format("mp3", "libmp3lame", "audio/mpeg", "s16p"),
    "aac": _Format("adts", "aac", "audio/aac", "fltp"),
    "opus": _Format("ogg", "libopus", "audio/ogg", "s16"),
}


def media_type(fmt: str) -> str:
    """The Content-Type OpenAI sends for a speech format."""
    return FORMATS[fmt].media_type


def decode(data: bytes, sample_rate: int) -> np.ndarray:
    """Decode any audio file to float32 mono at `sample_rate`; a 400 naming `file` if it is not audio."""
    try:
        with av.open(io.BytesIO(data), "r") as container:
            if not container.streams.audio:
                raise InvalidRequestError("The uploaded file has no audio stream.", param="file")
            resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
            pieces: list[np.ndarray] = []
            for frame in container.decode(container.streams.audio[0]):
                pieces.extend(out.to_ndarray().reshape(-1) for out in resampler.resample(frame))
            pieces.extend(out.to_ndarray().reshape(-1) for out in resampler.resample(None))
    except InvalidRequestError:
        raise
    except (av.FFmpegError, ValueError, IndexError) as error:
        raise InvalidRequestError(
            f"The uploaded file could not be decoded as audio: {error}", param="file"
        ) from error
    if not pieces:
        raise InvalidRequestError("The uploaded file contains no audio samples.", param="file")
    return np.concatenate(pieces).astype(np.float32, copy=False)


def encode(pcm: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """Encode float32 PCM ((F,) or (F, C)) as one of OpenAI's speech formats, mono at 24 kHz."""
    spec = FORMATS[fmt]
    mono = pcm.mean(axis=1) if pcm.ndim == 2 else pcm
    frame = av.AudioFrame.from_ndarray(
        np.ascontiguousarray(mono, np.float32)[None, :], format="flt", layout="mono"
    )
    frame.sample_rate = sample_rate
    resampler = av.AudioResampler(format=spec.sample_format, layout="mono", rate=OUTPUT_RATE)
    frames = [*resampler.resample(frame), *resampler.resample(None)]
    if spec.container is None:  # raw little-endian 16-bit samples
        return b"".join(f.to_ndarray().astype("<i2").tobytes() for f in frames)
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=spec.container) as container:
        stream = cast(
            av.audio.stream.AudioStream, container.add_stream(spec.codec, rate=OUTPUT_RATE, layout="mono")
        )
        fifo = av.AudioFifo()
        for f in frames:
            f.pts = None
            fifo.write(f)
        size = stream.codec_context.frame_size or 1024
        while fifo.samples:
            chunk = fifo.read(min(size, fifo.samples))
            container.mux(stream.encode(chunk))
        container.mux(stream.encode(None))
    return buffer.getvalue()
