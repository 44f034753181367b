"""A realtime session's responses: at most one at a time, created by the client (`response.create`) or
after a turn the server detected (queued behind the one under way), cancelled by the client or by the
user speaking over it; and `server_vad`'s idle timeout, which prompts a silent user with a response."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from openai.types.realtime import ResponseCancelEvent, ResponseCreateEvent

from modelport.ids import new_id
from modelport.service.realtime import config
from modelport.service.realtime.input_audio import MIN_COMMIT_MS
from modelport.service.realtime.realtime_events import ClientEventError, server_event
from modelport.service.realtime.responses import RealtimeResponse

if TYPE_CHECKING:
    from modelport.service.realtime.session import RealtimeSession


class Responding:
    """The response under way (`response`), and the idle timer armed after each answer."""

    def __init__(self, session: RealtimeSession) -> None:
        self.session = session
        self.response: RealtimeResponse | None = None
        self._idle: asyncio.TimerHandle | None = None  # `idle_timeout_ms`, armed after each answer

    async def create(self, event: ResponseCreateEvent) -> None:
        if self.session.kind != "realtime":
            raise ClientEventError("A transcription session makes no responses.", code="unsupported_event")
        if self.response is not None and not self.response.ended:
            raise ClientEventError(
                f"Conversation already has an active response in progress: {self.response.id}. Wait until "
                "the response is finished before creating a new one.",
                code="conversation_already_has_active_response",
            )
        given = event.response
        self.respond(given.model_dump(mode="json", exclude_unset=True) if given else {}, queued=False)

    async def cancel(self, event: ResponseCancelEvent) -> None:
        wanted = event.response_id
        if self.response is None or self.response.ended or (wanted and wanted != self.response.id):
            raise ClientEventError(
                "Cancellation failed: no active response found.", code="response_cancel_not_active"
            )
        self.response.cancel("client_cancelled")

    def interrupt(self, reason: str) -> None:
        """Stop the response under way, if any (its `response.done` still goes out)."""
        if self.response is not None:
            self.response.cancel(reason)

    def close(self) -> asyncio.Task[None] | None:
        """The client left: the response under way is cancelled; its task, to wait for."""
        self.disarm_idle()
        if self.response is None:
            return None
        self.response.cancel("client_cancelled")
        return self.response.task

    def respond(self, params: dict[str, Any], *, queued: bool) -> None:
        """Start a response now, or (`queued`, for turns the server detected) after the one under way."""
        before = self.response.task if self.response is not None and queued else None
        response = RealtimeResponse(self.session, params)

        async def run() -> None:
            if before is not None:
                await asyncio.wait([before])
            self.response = response
            self.disarm_idle()
            try:
                await response.start()
            finally:
                if self.response is response:
                    self.response = None
                    self._arm_idle(response)

        if before is None:
            self.response = response
        self.session.task(run())

    def _arm_idle(self, response: RealtimeResponse) -> None:
        """`server_vad`'s `idle_timeout_ms`: that long after the answer's audio would have finished
        playing, with no speech since, the server prompts the user to go on (a response of its own)."""
        detection = config.turn_detection(self.session.session) or {}
        waited = detection.get("idle_timeout_ms")
        if not waited or detection.get("type") != "server_vad" or self.session.kind != "realtime":
            return
        played = max((o.entry.spoken[-1].end_ms for o in response.outputs if o.entry.spoken), default=0.0)
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later((played + waited) / 1000, self._idle_expired)

    def disarm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _idle_expired(self) -> None:
        self._idle = None
        self.session.task(self._prompt())

    async def _prompt(self) -> None:
        """The user was silent past `idle_timeout_ms`: what the buffer holds is committed (when it is
        enough to commit) and the server answers."""
        heard = self.session.input_audio
        if self.response is not None or heard.speech is not None:
            return
        item_id = new_id("item", "_")
        start, end = heard.span_ms()
        await self.session.send(
            server_event(
                "input_audio_buffer.timeout_triggered",
                audio_start_ms=start,
                audio_end_ms=end,
                item_id=item_id,
            )
        )
        if end - start >= MIN_COMMIT_MS:
            await heard.committed(item_id, None)
        self.respond({}, queued=True)
