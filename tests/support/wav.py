"""Sound for the tests to send: 16-bit mono PCM as a WAV file's bytes."""

from __future__ import annotations

import io
import wave


def wav(pcm: bytes, rate: int) -> bytes:
    """`pcm` (16-bit little-endian mono samples at `rate` a second) as a WAV file."""
    out = io.BytesIO()
    with wave.open(out, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(rate)
        sound.writeframes(pcm)
    return out.getvalue()
