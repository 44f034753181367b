"""A realtime session's client events on its conversation's items: create, retrieve, delete and truncate,
and the cut of an answer's audio that a media transport plays (`output_audio_buffer.clear`, or the user
speaking over it), which truncates its item where the listener stopped hearing it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import orjson
from openai.types.realtime import (
    ConversationItemCreateEvent,
    ConversationItemDeleteEvent,
    ConversationItemRetrieveEvent,
    ConversationItemTruncateEvent,
    OutputAudioBufferClearEvent,
)

from modelport.service.realtime import config
from modelport.service.realtime.audio import Listener
from modelport.service.realtime.conversation import Entry
from modelport.service.realtime.realtime_events import ClientEventError, server_event

if TYPE_CHECKING:
    from modelport.service.realtime.session import RealtimeSession


class ItemEvents:
    """The handlers of the item events of one session."""

    def __init__(self, session: RealtimeSession) -> None:
        self.session = session

    async def create(self, event: ConversationItemCreateEvent) -> None:
        session = self.session
        item = session.conversation.checked(event.item.model_dump(mode="json", exclude_unset=True))
        entry = Entry(item)
        audio = [p for p in item.get("content") or [] if p.get("type") == "input_audio" and p.get("audio")]
        previous = session.conversation.add(entry, event.previous_item_id, bounded=True)
        await session.send(server_event("conversation.item.added", item=item, previous_item_id=previous))
        if audio and audio[0].get("transcript") is None:
            entry.audio = audio[0].pop("audio")
            listener = Listener(config.input_format(session.session))
            session.input_audio.listen(
                entry, listener.heard(listener.pcm16(entry.audio, "item.content.audio"))
            )
        else:
            for part in audio:
                part.pop("audio")  # kept once, for retrieval
            await session.send(server_event("conversation.item.done", item=item))

    async def retrieve(self, event: ConversationItemRetrieveEvent) -> None:
        conversation = self.session.conversation
        entry = conversation.entries[conversation.index(event.item_id)]
        item = orjson.loads(orjson.dumps(entry.item))
        if entry.audio is not None:
            item["content"][0]["audio"] = entry.audio
        await self.session.send(server_event("conversation.item.retrieved", item=item))

    async def delete(self, event: ConversationItemDeleteEvent) -> None:
        self.session.conversation.delete(event.item_id)
        await self.session.send(server_event("conversation.item.deleted", item_id=event.item_id))

    async def truncate(self, event: ConversationItemTruncateEvent) -> None:
        response = self.session.responding.response
        if response is not None and any(o.entry.item["id"] == event.item_id for o in response.outputs):
            response.cancel("client_cancelled")  # what is still to be said of it is not wanted
            if response.task is not None:
                await asyncio.wait([response.task])
        self.session.conversation.truncate(event.item_id, event.content_index, event.audio_end_ms)
        await self.session.send(
            server_event(
                "conversation.item.truncated",
                item_id=event.item_id,
                content_index=event.content_index,
                audio_end_ms=event.audio_end_ms,
            )
        )

    async def clear_output(self, event: OutputAudioBufferClearEvent) -> None:
        if self.session.playout is None:
            raise ClientEventError(
                "output_audio_buffer.clear is for WebRTC and SIP connections; over a WebSocket the client "
                "plays the audio itself: stop playing and send conversation.item.truncate.",
                code="unsupported_event",
            )
        await self.cut()

    async def cut(self) -> None:
        """Stop the answer audio a media transport plays, and cut its item where the user stopped hearing
        it (as a WebSocket client does with `conversation.item.truncate`)."""
        playout = self.session.playout
        cut = playout.clear() if playout is not None else None
        if cut is None:
            return
        with contextlib.suppress(ClientEventError):  # an item deleted meanwhile stays deleted
            self.session.conversation.truncate(cut.item_id, 0, cut.played_ms)
            await self.session.send(
                server_event(
                    "conversation.item.truncated",
                    item_id=cut.item_id,
                    content_index=0,
                    audio_end_ms=cut.played_ms,
                )
            )
