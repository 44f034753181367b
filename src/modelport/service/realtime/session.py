"""One Realtime API session: the client's events in, the server's events out. It holds the configuration
and the conversation, and serves each client event by the handler its openai class is keyed to; the
handlers live by family beside it: the input audio buffer (`input_audio`), the conversation's items
(`item_events`), responses (`responding`). A client event that cannot be served gets an `error` event
naming it; the session goes on."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
from openai.types.realtime import (
    ConversationItemCreateEvent,
    ConversationItemDeleteEvent,
    ConversationItemRetrieveEvent,
    ConversationItemTruncateEvent,
    InputAudioBufferAppendEvent,
    InputAudioBufferClearEvent,
    InputAudioBufferCommitEvent,
    OutputAudioBufferClearEvent,
    RealtimeServerEvent,
    ResponseCancelEvent,
    ResponseCreateEvent,
    SessionUpdateEvent,
)
from pydantic import BaseModel

from modelport.errors import ModelportError
from modelport.ids import new_id
from modelport.service.realtime import beta, config
from modelport.service.realtime.conversation import Conversation
from modelport.service.realtime.input_audio import InputAudio
from modelport.service.realtime.item_events import ItemEvents
from modelport.service.realtime.pipes import Pipes
from modelport.service.realtime.playout import Playout
from modelport.service.realtime.realtime_events import (
    ClientEventError,
    Outgoing,
    client_event,
    error_event,
    server_event,
)
from modelport.service.realtime.responding import Responding
from modelport.settings import Limits, RealtimePipeline

log = logging.getLogger("modelport.realtime")

E = TypeVar("E", bound=BaseModel)
Handler = Callable[[Any], Awaitable[None]]


def _on(cls: type[E], handler: Callable[[E], Awaitable[None]]) -> tuple[type[BaseModel], Handler]:
    """One row of a session's handlers: the client event's openai class and what serves it (typed alike)."""
    return cls, handler


class RealtimeSession:
    """The state of one connection; `receive` takes each client message, `send` carries server events."""

    def __init__(
        self,
        pipeline: RealtimePipeline,
        kind: str,
        model: str,
        pipes: Pipes,
        limits: Limits,
        send: Callable[[Outgoing], Awaitable[None]],
        beta_protocol: bool = False,
        media: bool = False,
    ) -> None:
        self.pipeline, self.kind, self.pipes, self.limits = pipeline, kind, pipes, limits
        self.beta = beta_protocol  # the client speaks the beta protocol: events are translated at the edge
        # `media`: the transport carries the audio itself (a WebRTC call): it plays answers from `playout`
        # and brings the user's speech to `input_audio.hear`; the session's audio formats do not apply.
        self.playout = Playout(lambda event: self.task(self.send(event))) if media else None
        self.session = config.initial(pipeline, kind, model)
        self.id = new_id("sess", "_")
        self.started = self.active = time.monotonic()  # `active`: the client's last event or audio
        self.conversation = Conversation(limits.realtime_items, limits.realtime_conversation_bytes)
        self._send = send
        self._tasks: set[asyncio.Task[Any]] = set()
        self.input_audio = InputAudio(self)
        self.items = ItemEvents(self)
        self.responding = Responding(self)
        self.handlers: dict[type[BaseModel], Handler] = dict(
            [
                _on(SessionUpdateEvent, self.update),
                _on(InputAudioBufferAppendEvent, self.input_audio.append),
                _on(InputAudioBufferCommitEvent, self.input_audio.commit),
                _on(InputAudioBufferClearEvent, self.input_audio.clear),
                _on(OutputAudioBufferClearEvent, self.items.clear_output),
                _on(ConversationItemCreateEvent, self.items.create),
                _on(ConversationItemRetrieveEvent, self.items.retrieve),
                _on(ConversationItemDeleteEvent, self.items.delete),
                _on(ConversationItemTruncateEvent, self.items.truncate),
                _on(ResponseCreateEvent, self.responding.create),
                _on(ResponseCancelEvent, self.responding.cancel),
            ]
        )

    async def send(self, event: RealtimeServerEvent) -> None:
        if not self.beta:
            await self._send(event)
        elif (shown := beta.server_event(event, self.kind == "transcription")) is not None:
            await self._send(shown)  # (None: the beta protocol has no such event)

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
        self.input_audio.drop_early()
        answering = self.responding.close()
        for task in [*self._tasks, *([answering] if answering is not None else [])]:
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
            event = client_event(data)
            await self.handlers[type(event)](event)
        except (ClientEventError, ModelportError) as error:
            await self.send(error_event(error, event_id))

    async def update(self, event: SessionUpdateEvent) -> None:
        self.configure(
            config.updated(self.session, event.session.model_dump(mode="json", exclude_unset=True))
        )
        await self.send(server_event("session.updated", session=self.shown()))

    def configure(self, session: config.Session) -> None:
        """Take a whole new configuration (checked already)."""
        before, self.session = self.session, session
        self.input_audio.reconfigured(before)

    def task(self, work: Awaitable[None]) -> None:
        """Run `work` for the session: cancelled when it closes, its failure logged."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("realtime session %s: %r", self.id, task.exception(), exc_info=task.exception())
