"""A realtime session's input audio buffer: the user's audio as it comes (`input_audio_buffer.append`, or a
media transport's decoded track), its speech detection and turns, the commits that make it a user audio
item, and the transcription of each such item in the background (responses wait for it)."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import TYPE_CHECKING

import numpy as np
from openai.types.realtime import (
    InputAudioBufferAppendEvent,
    InputAudioBufferClearEvent,
    InputAudioBufferCommitEvent,
)

from modelport.engines.silero_vad import RATE, SpeechDetector
from modelport.errors import ModelportError
from modelport.ids import new_id
from modelport.service.realtime import config
from modelport.service.realtime.audio import LISTEN_RATE, Listener
from modelport.service.realtime.conversation import Entry
from modelport.service.realtime.realtime_events import ClientEventError, server_event
from modelport.service.realtime.turns import Change, TurnDetector

if TYPE_CHECKING:
    from modelport.service.realtime.session import RealtimeSession

MIN_COMMIT_MS = 100  # OpenAI's least audio a commit takes


class InputAudio:
    """The buffer since the last commit or clear, at 16 kHz and as it was sent, and the speech under way."""

    def __init__(self, session: RealtimeSession) -> None:
        self.session = session
        self.heard = 0  # samples at 16 kHz since the session began
        self.start = 0  # `heard` when the buffer was last emptied
        self.speech: tuple[str, int] | None = None  # the item id and start (ms) of speech under way
        self._detector = SpeechDetector()
        self._listener = Listener(config.input_format(session.session))
        self._buffer: list[np.ndarray] = []  # at 16 kHz
        self._raw: list[np.ndarray] = []  # the same audio as it was sent
        self._early: asyncio.Task[str] | None = None  # transcribing speech before a pause, should it end
        self._turns = self._turn_detector()

    def reconfigured(self, before: config.Session) -> None:
        """The session's configuration changed from `before`: a new input format or turn detection."""
        now = self.session.session
        if config.input_format(before) != config.input_format(now) and self.session.playout is None:
            self._listener = Listener(config.input_format(now))
        if config.turn_detection(before) != config.turn_detection(now):
            self._turns = self._turn_detector()

    def _turn_detector(self) -> TurnDetector | None:
        self._detector.reset()
        detection = config.turn_detection(self.session.session)
        return TurnDetector(detection, self.heard * 1000 // LISTEN_RATE) if detection else None

    def span_ms(self) -> tuple[int, int]:
        """Where the buffer starts and ends, in ms of the session."""
        return self.start * 1000 // LISTEN_RATE, self.heard * 1000 // LISTEN_RATE

    async def append(self, event: InputAudioBufferAppendEvent) -> None:
        await self.hear(self._listener.pcm16(event.audio, "audio"))

    async def hear(self, pcm: np.ndarray) -> None:
        """The user's audio, 16-bit samples of the input format (a media transport's: PCM at 24 kHz),
        into the buffer and its speech detection."""
        self.session.active = time.monotonic()
        buffered = (self.heard - self.start) / LISTEN_RATE
        most = self.session.limits.realtime_buffer_seconds
        if buffered + len(pcm) / self._listener.rate > most:
            raise ClientEventError(
                f"The input audio buffer holds {most:g} s at most: commit or clear it.",
                code="input_audio_buffer_full",
                param="audio",
            )
        samples = self._listener.heard(pcm)
        self._raw.append(pcm)
        self._buffer.append(samples)
        self.heard += len(samples)
        if self._turns is not None:
            for change in self._turns.feed(self._detector.feed(samples)):
                await self._changed(change)

    async def _changed(self, change: Change) -> None:
        session = self.session
        detection = config.turn_detection(session.session) or {}
        if change.kind == "started":
            session.responding.disarm_idle()
            item_id = new_id("item", "_")
            self.speech = (item_id, change.ms)
            await session.send(
                server_event("input_audio_buffer.speech_started", audio_start_ms=change.ms, item_id=item_id)
            )
            if detection.get("interrupt_response", True):
                session.responding.interrupt("turn_detected")  # the user speaks over the answer
                await session.items.cut()  # ... and stops hearing it, though it was all made already
            return
        if change.kind == "paused" and self.speech is not None:
            heard = self._buffered(self.speech[1], change.ms)
            self._early = asyncio.ensure_future(
                session.pipes.transcribe(heard, config.transcription(session.session) or {})
            )
            # A transcript nobody takes (the user went on) may have failed: that is no one's concern.
            self._early.add_done_callback(lambda task: task.cancelled() or task.exception())
            return
        if change.kind == "resumed":
            self.drop_early()
            return
        item_id, start = self.speech or (new_id("item", "_"), change.ms)
        self.speech = None
        await session.send(
            server_event("input_audio_buffer.speech_stopped", audio_end_ms=change.ms, item_id=item_id)
        )
        early, self._early = self._early, None
        await self.committed(item_id, start, early)
        if session.kind == "realtime" and detection.get("create_response", True):
            session.responding.respond({}, queued=True)

    async def commit(self, event: InputAudioBufferCommitEvent) -> None:
        held = (self.heard - self.start) * 1000 // LISTEN_RATE
        if held < MIN_COMMIT_MS:
            raise ClientEventError(
                "Error committing input audio buffer: buffer too small. Expected at least "
                f"{MIN_COMMIT_MS}ms of audio, but buffer only has {held:.2f}ms of audio.",
                code="input_audio_buffer_commit_empty",
            )
        item_id = self.speech[0] if self.speech else new_id("item", "_")
        self.speech = None
        self.drop_early()
        await self.committed(item_id, None)

    async def clear(self, event: InputAudioBufferClearEvent) -> None:
        self.drop_early()
        self.start = self.heard
        self._buffer, self._raw, self.speech = [], [], None
        self._turns = self._turn_detector()
        await self.session.send(server_event("input_audio_buffer.cleared"))

    def drop_early(self) -> None:
        if self._early is not None:
            self._early.cancel()
            self._early = None

    def _buffered(self, start_ms: int | None, end_ms: int | None = None) -> np.ndarray:
        """The buffer's 16 kHz audio between two times of the session (ms), or all of it."""
        samples = np.concatenate(self._buffer) if self._buffer else np.zeros(0, np.float32)
        begin = max(0, start_ms * LISTEN_RATE // 1000 - self.start) if start_ms is not None else 0
        end = end_ms * LISTEN_RATE // 1000 - self.start if end_ms is not None else len(samples)
        return samples[begin:end]

    async def committed(
        self, item_id: str, start_ms: int | None, early: asyncio.Task[str] | None = None
    ) -> None:
        """The buffer (from where speech started, less the padding) becomes a user audio item; `early`, if
        given, is already transcribing its speech."""
        samples = self._buffered(start_ms)
        raw = np.concatenate(self._raw) if self._raw else np.zeros(0, np.int16)
        if start_ms is not None:
            skip = max(0, start_ms * LISTEN_RATE // 1000 - self.start)
            raw = raw[skip * self._listener.rate // LISTEN_RATE :]
        self.start = self.heard
        self._buffer, self._raw = [], []
        item = {
            "id": item_id,
            "type": "message",
            "role": "user",
            "object": "realtime.item",
            "status": "completed",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        entry = Entry(item, audio=base64.b64encode(raw.astype("<i2").tobytes()).decode())
        previous = self.session.conversation.add(entry)
        await self.session.send(
            server_event("input_audio_buffer.committed", item_id=item_id, previous_item_id=previous)
        )
        await self.session.send(server_event("conversation.item.added", item=item, previous_item_id=previous))
        self.listen(entry, samples, early)

    def listen(self, entry: Entry, samples: np.ndarray, early: asyncio.Task[str] | None = None) -> None:
        """Transcribe a user's audio item in the background (or take `early`'s transcript); responses wait
        for it."""
        session = self.session
        entry.heard = asyncio.get_running_loop().create_future()
        asked = config.transcription(session.session) is not None or session.kind == "transcription"

        async def transcribe() -> None:
            assert entry.heard is not None
            item = entry.item
            text, failed = "", None
            try:
                given = config.transcription(session.session) or {}
                text = await (early if early is not None else session.pipes.transcribe(samples, given))
            except ModelportError as error:
                failed = {"type": error.type, "code": error.code, "message": error.message}
            finally:  # the responses waiting for it go on (shielded), with nothing heard where it failed
                entry.heard.set_result(text)
            if failed is not None:
                await session.send(
                    server_event(
                        "conversation.item.input_audio_transcription.failed",
                        item_id=item["id"],
                        content_index=0,
                        error=failed,
                    )
                )
                return
            if asked:
                item["content"][0]["transcript"] = text
                where = {"item_id": item["id"], "content_index": 0}
                await session.send(
                    server_event("conversation.item.input_audio_transcription.delta", **where, delta=text)
                )
                usage = {"type": "duration", "seconds": round(len(samples) / RATE, 3)}
                await session.send(
                    server_event(
                        "conversation.item.input_audio_transcription.completed",
                        **where,
                        transcript=text,
                        usage=usage,
                    )
                )
            await session.send(server_event("conversation.item.done", item=item))

        session.task(transcribe())
