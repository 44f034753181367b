"""A WebRTC call's microphone for the tests and benchmarks that play a browser (aiortc as the client)."""

from __future__ import annotations

import asyncio
import fractions
import time

import av
import numpy as np
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

RATE = 24_000  # 16-bit mono PCM, as the realtime sessions speak it
FRAME = RATE // 50  # 20 ms


class Microphone(MediaStreamTrack):
    """What the user says: silence, then whatever `say` is given, at real-time pace; `spoken` is when the
    speech last given ended (`time.perf_counter()`), once it has been sent."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self.waiting = bytearray()
        self.start: float | None = None
        self.sent = 0  # samples
        self.spoken: float | None = None
        self._speech_ends: int | None = None  # the sample where the speech last given ends

    def say(self, pcm: bytes, silence_ms: int = 1200) -> None:
        """`pcm` (16-bit at 24 kHz), then `silence_ms` of silence, after what is still waiting."""
        self.spoken = None
        self._speech_ends = self.sent + (len(self.waiting) + len(pcm)) // 2
        self.waiting += pcm + bytes(RATE * 2 * silence_ms // 1000)

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self.start is None:
            self.start = time.perf_counter()
        await asyncio.sleep(max(0.0, self.start + self.sent / RATE - time.perf_counter()))
        chunk = bytes(self.waiting[: FRAME * 2]).ljust(FRAME * 2, b"\0")
        del self.waiting[: FRAME * 2]
        frame = av.AudioFrame.from_ndarray(np.frombuffer(chunk, "<i2").reshape(1, -1), "s16", "mono")
        frame.sample_rate, frame.pts, frame.time_base = RATE, self.sent, fractions.Fraction(1, RATE)
        self.sent += FRAME
        if self._speech_ends is not None and self.spoken is None and self.sent >= self._speech_ends:
            self.spoken = self.start + self._speech_ends / RATE
        return frame
