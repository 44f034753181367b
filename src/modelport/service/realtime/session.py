"""One Realtime API session: the client's events in, the server's events out. It holds the configuration,
the conversation, the input audio buffer with its speech detection, and at most one response at a time.
A client event that cannot be served gets an `error` event naming it; the session goes on."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import orjson

from modelport.engines.silero_vad import RATE, SpeechDetector
from modelport.errors import ModelportError
from modelport.ids import new_id
from modelport.service.realtime import beta, config
from modelport.service.realtime.audio import LISTEN_RATE, Listener
from modelport.service.realtime.conversation import Conversation, Entry
from modelport.service.realtime.playout import Playout
from modelport.service.realtime.realtime_events import (
    ClientEventError,
    Event,
    client_event,
    error_event,
    server_event,
)
from modelport.service.realtime.responses import Pipes, RealtimeResponse
from modelport.service.realtime.turns import Change, TurnDetector
from modelport.settings import Limits, RealtimePipeline

_MIN_COMMIT_MS = 100  # OpenAI's least audio a commit takes
log = logging.getLogger("modelport.realtime")


class RealtimeSession:
    """The state of one connection; `receive` takes each client message, `send` carries server events."""

    def __init__(
        self,
        pipeline: RealtimePipeline,
        kind: str,
        model: str,
        pipes: Pipes,
        limits: Limits,
        send: Callable[[Event], Awaitable[None]],
        beta_protocol: bool = False,
        media: bool = False,
    ) -> None:
        self.pipeline, self.kind, self.pipes, self.limits = pipeline, kind, pipes, limits
        self.beta = beta_protocol  # the client speaks the beta protocol: events are translated at the edge
        # `media`: the transport carries the audio itself (a WebRTC call): it plays answers from `playout`
        # and brings the user's speech to `hear`; the session's audio formats do not apply.
        self.playout = Playout(lambda event: self._task(self.send(event))) if media else None
        self.session = config.initial(pipeline, kind, model)
        self.id = new_id("sess", "_")
        self.started = self.active = time.monotonic()  # `active`: the client's last event or audio
        self.conversation = Conversation(limits.realtime_items, limits.realtime_conversation_bytes)
        self.response: RealtimeResponse | None = None
        self._send = send
        self._tasks: set[asyncio.Task[Any]] = set()
        self._detector = SpeechDetector()
        self._listener = Listener(config.input_format(self.session))
        self._heard = 0  # samples at 16 kHz since the session began
        self._buffer: list[np.ndarray] = []  # at 16 kHz, since the last commit or clear
        self._raw: list[np.ndarray] = []  # the same audio as it was sent
        self._buffer_start = 0
        self._speech: tuple[str, int] | None = None  # the item id and start (ms) of speech under way
        self._early: asyncio.Task[str] | None = None  # transcribing speech before a pause, should it end
        self._idle: asyncio.TimerHandle | None = None  # `idle_timeout_ms`, armed after each answer
        self._turns = self._turn_detector()

    async def send(self, event: Event) -> None:
        if self.beta:
            shown = beta.server_event(event, self.kind == "transcription")
            if shown is None:
                return  # the beta protocol has no such event
            event = shown
        await self._send(event)

    def shown(self) -> dict[str, Any]:
        """The session as `session.created` and `session.updated` show it."""
        expires = int(time.time() + self.limits.realtime_minutes * 60 - (time.monotonic() - self.started))
        return {**self.session, "id": self.id, "object": "realtime.session", "expires_at": expires}

    async def start(self) -> None:
        await self.send(server_event("session.created", session=self.shown()))

    def seconds_left(self) -> float:
        """Until the session reaches its length limit."""
        return self.limits.realtime_minutes * 60 - (time.monotonic() - self.started)

    async def close(self) -> None:
        """The client left: stop what is being made for it."""
        self._drop_early()
        self._disarm_idle()
        if self.response is not None:
            self.response.cancel("client_cancelled")
        for task in [*self._tasks, *([self.response.task] if self.response and self.response.task else [])]:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def receive(self, message: str | bytes) -> None:
        """One client message: an event, served; or an `error` event saying why not."""
        self.active = time.monotonic()
        event_id = None
        try:
            if len(message) > self.limits.realtime_message_bytes:
                raise ClientEventError(
                    f"A message may be {self.limits.realtime_message_bytes} bytes at most; this one is "
                    f"{len(message)}.",
                    code="message_too_large",
                )
            try:
                data = orjson.loads(message)
            except orjson.JSONDecodeError as error:
                raise ClientEventError(f"The message is not JSON: {error}.", code="invalid_json") from None
            given = data.get("event_id") if isinstance(data, dict) else None
            event_id = given if isinstance(given, str) else None  # a number there once dropped the session
            if self.beta:
                data = beta.client_event(data)
            if isinstance(data, dict) and data.get("type") == "transcription_session.update":
                data["type"] = "session.update"  # the beta name of a transcription session's update
            if (
                isinstance(data, dict)
                and data.get("type") == "session.update"
                and isinstance(data.get("session"), dict)
            ):
                data["session"].setdefault("type", self.session["type"])  # beta clients leave it out
            client_event(data)
            await getattr(self, "_on_" + data["type"].replace(".", "_"))(data)
        except (ClientEventError, ModelportError) as error:
            await self.send(error_event(error, event_id))

    # --- configuration ---------------------------------------------------------------------------------

    async def _on_session_update(self, data: dict[str, Any]) -> None:
        self.configure(config.updated(self.session, data["session"]))
        await self.send(server_event("session.updated", session=self.shown()))

    def configure(self, session: config.Session) -> None:
        """Take a whole new configuration (checked already)."""
        before, self.session = self.session, session
        if config.input_format(before) != config.input_format(self.session) and self.playout is None:
            self._listener = Listener(config.input_format(self.session))
        if config.turn_detection(before) != config.turn_detection(self.session):
            self._turns = self._turn_detector()

    def _turn_detector(self) -> TurnDetector | None:
        self._detector.reset()
        detection = config.turn_detection(self.session)
        return TurnDetector(detection, self._heard * 1000 // LISTEN_RATE) if detection else None

    # --- the input audio buffer ------------------------------------------------------------------------

    async def _on_input_audio_buffer_append(self, data: dict[str, Any]) -> None:
        await self.hear(self._listener.pcm16(data["audio"], "audio"))

    async def hear(self, pcm: np.ndarray) -> None:
        """The user's audio, 16-bit samples of the input format (a media transport's: PCM at 24 kHz),
        into the input audio buffer and its speech detection."""
        self.active = time.monotonic()
        buffered = (self._heard - self._buffer_start) / LISTEN_RATE
        if buffered + len(pcm) / self._listener.rate > self.limits.realtime_buffer_seconds:
            raise ClientEventError(
                f"The input audio buffer holds {self.limits.realtime_buffer_seconds:g} s at most: commit or "
                "clear it.",
                code="input_audio_buffer_full",
                param="audio",
            )
        samples = self._listener.heard(pcm)
        self._raw.append(pcm)
        self._buffer.append(samples)
        self._heard += len(samples)
        if self._turns is not None:
            for change in self._turns.feed(self._detector.feed(samples)):
                await self._changed(change)

    async def _changed(self, change: Change) -> None:
        detection = config.turn_detection(self.session) or {}
        if change.kind == "started":
            self._disarm_idle()
            item_id = new_id("item", "_")
            self._speech = (item_id, change.ms)
            await self.send(
                server_event("input_audio_buffer.speech_started", audio_start_ms=change.ms, item_id=item_id)
            )
            if detection.get("interrupt_response", True):
                if self.response is not None:
                    self.response.cancel("turn_detected")  # the user speaks over the answer
                await self._cut()  # ... and stops hearing it, though it was all made already
            return
        if change.kind == "paused" and self._speech is not None:
            heard = self._buffered(self._speech[1], change.ms)
            self._early = asyncio.ensure_future(
                self.pipes.transcribe(heard, config.transcription(self.session) or {})
            )
            # A transcript nobody takes (the user went on) may have failed: that is no one's concern.
            self._early.add_done_callback(lambda task: task.cancelled() or task.exception())
            return
        if change.kind == "resumed":
            self._drop_early()
            return
        item_id, start = self._speech or (new_id("item", "_"), change.ms)
        self._speech = None
        await self.send(
            server_event("input_audio_buffer.speech_stopped", audio_end_ms=change.ms, item_id=item_id)
        )
        early, self._early = self._early, None
        await self._commit(item_id, start, early)
        if self.kind == "realtime" and detection.get("create_response", True):
            self._respond({}, queued=True)

    async def _on_input_audio_buffer_commit(self, data: dict[str, Any]) -> None:
        held = (self._heard - self._buffer_start) * 1000 // LISTEN_RATE
        if held < _MIN_COMMIT_MS:
            raise ClientEventError(
                "Error committing input audio buffer: buffer too small. Expected at least "
                f"{_MIN_COMMIT_MS}ms of audio, but buffer only has {held:.2f}ms of audio.",
                code="input_audio_buffer_commit_empty",
            )
        item_id = self._speech[0] if self._speech else new_id("item", "_")
        self._speech = None
        self._drop_early()
        await self._commit(item_id, None)

    async def _on_input_audio_buffer_clear(self, data: dict[str, Any]) -> None:
        self._drop_early()
        self._buffer_start = self._heard
        self._buffer, self._raw, self._speech = [], [], None
        self._turns = self._turn_detector()
        await self.send(server_event("input_audio_buffer.cleared"))

    async def _on_output_audio_buffer_clear(self, data: dict[str, Any]) -> None:
        if self.playout is None:
            raise ClientEventError(
                "output_audio_buffer.clear is for WebRTC and SIP connections; over a WebSocket the client "
                "plays the audio itself: stop playing and send conversation.item.truncate.",
                code="unsupported_event",
            )
        await self._cut()

    async def _cut(self) -> None:
        """Stop the answer audio a media transport plays, and cut its item where the user stopped hearing
        it (as a WebSocket client does with `conversation.item.truncate`)."""
        cut = self.playout.clear() if self.playout is not None else None
        if cut is None:
            return
        with contextlib.suppress(ClientEventError):  # an item deleted meanwhile stays deleted
            self.conversation.truncate(cut.item_id, 0, cut.played_ms)
            await self.send(
                server_event(
                    "conversation.item.truncated",
                    item_id=cut.item_id,
                    content_index=0,
                    audio_end_ms=cut.played_ms,
                )
            )

    def _drop_early(self) -> None:
        if self._early is not None:
            self._early.cancel()
            self._early = None

    def _buffered(self, start_ms: int | None, end_ms: int | None = None) -> np.ndarray:
        """The buffer's 16 kHz audio between two times of the session (ms), or all of it."""
        samples = np.concatenate(self._buffer) if self._buffer else np.zeros(0, np.float32)
        begin = max(0, start_ms * LISTEN_RATE // 1000 - self._buffer_start) if start_ms is not None else 0
        end = end_ms * LISTEN_RATE // 1000 - self._buffer_start if end_ms is not None else len(samples)
        return samples[begin:end]

    async def _commit(
        self, item_id: str, start_ms: int | None, early: asyncio.Task[str] | None = None
    ) -> None:
        """The buffer (from where speech started, less the padding) becomes a user audio item; `early`, if
        given, is already transcribing its speech."""
        samples = self._buffered(start_ms)
        raw = np.concatenate(self._raw) if self._raw else np.zeros(0, np.int16)
        if start_ms is not None:
            skip = max(0, start_ms * LISTEN_RATE // 1000 - self._buffer_start)
            raw = raw[skip * self._listener.rate // LISTEN_RATE :]
        self._buffer_start = self._heard
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
        previous = self.conversation.add(entry)
        await self.send(
            server_event("input_audio_buffer.committed", item_id=item_id, previous_item_id=previous)
        )
        await self.send(server_event("conversation.item.added", item=item, previous_item_id=previous))
        self._listen(entry, samples, early)

    def _listen(self, entry: Entry, samples: np.ndarray, early: asyncio.Task[str] | None = None) -> None:
        """Transcribe a user's audio item in the background (or take `early`'s transcript); responses wait
        for it."""
        entry.heard = asyncio.get_running_loop().create_future()
        asked = config.transcription(self.session) is not None or self.kind == "transcription"

        async def transcribe() -> None:
            assert entry.heard is not None
            item = entry.item
            try:
                given = config.transcription(self.session) or {}
                text = await (early if early is not None else self.pipes.transcribe(samples, given))
            except ModelportError as error:
                entry.heard.set_result("")
                failed = {"type": error.type, "code": error.code, "message": error.message}
                await self.send(
                    server_event(
                        "conversation.item.input_audio_transcription.failed",
                        item_id=item["id"],
                        content_index=0,
                        error=failed,
                    )
                )
                return
            entry.heard.set_result(text)
            if asked:
                item["content"][0]["transcript"] = text
                where = {"item_id": item["id"], "content_index": 0}
                await self.send(
                    server_event("conversation.item.input_audio_transcription.delta", **where, delta=text)
                )
                usage = {"type": "duration", "seconds": round(len(samples) / RATE, 3)}
                await self.send(
                    server_event(
                        "conversation.item.input_audio_transcription.completed",
                        **where,
                        transcript=text,
                        usage=usage,
                    )
                )
            await self.send(server_event("conversation.item.done", item=item))

        self._task(transcribe())

    # --- the conversation ------------------------------------------------------------------------------

    async def _on_conversation_item_create(self, data: dict[str, Any]) -> None:
        item = self.conversation.checked(data.get("item"))
        entry = Entry(item)
        audio = [p for p in item.get("content") or [] if p.get("type") == "input_audio" and p.get("audio")]
        previous = self.conversation.add(entry, data.get("previous_item_id"), bounded=True)
        await self.send(server_event("conversation.item.added", item=item, previous_item_id=previous))
        if audio and audio[0].get("transcript") is None:
            entry.audio = audio[0].pop("audio")
            listener = Listener(config.input_format(self.session))
            self._listen(entry, listener.heard(listener.pcm16(entry.audio, "item.content.audio")))
        else:
            for part in audio:
                part.pop("audio")  # kept once, for retrieval
            await self.send(server_event("conversation.item.done", item=item))

    async def _on_conversation_item_retrieve(self, data: dict[str, Any]) -> None:
        entry = self.conversation.entries[self.conversation.index(data["item_id"])]
        item = orjson.loads(orjson.dumps(entry.item))
        if entry.audio is not None:
            item["content"][0]["audio"] = entry.audio
        await self.send(server_event("conversation.item.retrieved", item=item))

    async def _on_conversation_item_delete(self, data: dict[str, Any]) -> None:
        self.conversation.delete(data["item_id"])
        await self.send(server_event("conversation.item.deleted", item_id=data["item_id"]))

    async def _on_conversation_item_truncate(self, data: dict[str, Any]) -> None:
        if self.response is not None and any(
            o.entry.item["id"] == data["item_id"] for o in self.response.outputs
        ):
            self.response.cancel("client_cancelled")  # what is still to be said of it is not wanted
            if self.response.task is not None:
                await asyncio.wait([self.response.task])
        self.conversation.truncate(data["item_id"], data["content_index"], data["audio_end_ms"])
        await self.send(
            server_event(
                "conversation.item.truncated",
                item_id=data["item_id"],
                content_index=data["content_index"],
                audio_end_ms=data["audio_end_ms"],
            )
        )

    # --- responses -------------------------------------------------------------------------------------

    async def _on_response_create(self, data: dict[str, Any]) -> None:
        if self.kind != "realtime":
            raise ClientEventError("A transcription session makes no responses.", code="unsupported_event")
        if self.response is not None and not self.response.ended:
            raise ClientEventError(
                f"Conversation already has an active response in progress: {self.response.id}. Wait until "
                "the response is finished before creating a new one.",
                code="conversation_already_has_active_response",
            )
        self._respond(data.get("response") or {}, queued=False)

    async def _on_response_cancel(self, data: dict[str, Any]) -> None:
        wanted = data.get("response_id")
        if self.response is None or self.response.ended or (wanted and wanted != self.response.id):
            raise ClientEventError(
                "Cancellation failed: no active response found.", code="response_cancel_not_active"
            )
        self.response.cancel("client_cancelled")

    def _respond(self, params: dict[str, Any], *, queued: bool) -> None:
        """Start a response now, or (`queued`, for turns the server detected) after the one under way."""
        before = self.response.task if self.response is not None and queued else None
        response = RealtimeResponse(self, params)

        async def run() -> None:
            if before is not None:
                await asyncio.wait([before])
            self.response = response
            self._disarm_idle()
            try:
                await response.start()
            finally:
                if self.response is response:
                    self.response = None
                    self._arm_idle(response)

        if before is None:
            self.response = response
        self._task(run())

    def _arm_idle(self, response: RealtimeResponse) -> None:
        """`server_vad`'s `idle_timeout_ms`: that long after the answer's audio would have finished
        playing, with no speech since, the server prompts the user to go on (a response of its own)."""
        detection = config.turn_detection(self.session) or {}
        waited = detection.get("idle_timeout_ms")
        if not waited or detection.get("type") != "server_vad" or self.kind != "realtime":
            return
        played = max((o.entry.spoken[-1].end_ms for o in response.outputs if o.entry.spoken), default=0.0)
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later((played + waited) / 1000, lambda: self._task(self._idle_expired()))

    def _disarm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    async def _idle_expired(self) -> None:
        self._idle = None
        if self.response is not None or self._speech is not None:
            return
        item_id = new_id("item", "_")
        start, end = (self._buffer_start * 1000 // LISTEN_RATE, self._heard * 1000 // LISTEN_RATE)
        await self.send(
            server_event(
                "input_audio_buffer.timeout_triggered",
                audio_start_ms=start,
                audio_end_ms=end,
                item_id=item_id,
            )
        )
        if end - start >= _MIN_COMMIT_MS:
            await self._commit(item_id, None)
        self._respond({}, queued=True)

    def _task(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("realtime session %s: %r", self.id, task.exception(), exc_info=task.exception())
