"""A realtime session's conversation: its items in order (as the Realtime API shows them), what the chat
model reads of each (a user's audio as its transcript, an assistant's audio as the transcript of what was
heard of it), and the timing of each assistant answer's spoken clauses, so `conversation.item.truncate`
can cut its transcript where the user stopped listening."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson
from openai.types.realtime import ConversationItem
from pydantic import TypeAdapter, ValidationError

from modelport.ids import new_id
from modelport.service.realtime.realtime_events import ClientEventError, invalid

Item = dict[str, Any]
_ITEM: TypeAdapter[Any] = TypeAdapter(ConversationItem)


@dataclass
class Spoken:
    """One clause of an assistant's audio: its text, and where its audio ends (ms from the item's start)."""

    text: str
    end_ms: float


@dataclass
class Entry:
    """An item, and what the service knows of it beyond what the client sees."""

    item: Item
    heard: asyncio.Future[str] | None = None  # a user audio item's transcript, when it is ready
    spoken: list[Spoken] = field(default_factory=list)  # an assistant audio item's clauses
    audio: str | None = None  # a user audio item's audio as sent (base64), for `conversation.item.retrieve`
    size: int = 0  # its bytes in the conversation's bound, counted as it was added


class Conversation:
    """The items of one session, in order, found by id at once (a client may send thousands: nothing it
    adds may cost more than its own size), and bounded in count and bytes (`[limits] realtime_items`,
    `realtime_conversation_bytes`)."""

    def __init__(self, max_items: int = 4096, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.entries: list[Entry] = []
        self.max_items, self.max_bytes = max_items, max_bytes
        self._by_id: dict[str, Entry] = {}
        self.size = 0

    def checked(self, given: Any, param: str = "item") -> Item:
        """An item a client created, checked by the openai package's item types, with an id and status."""
        try:
            item: Item = _ITEM.validate_python(given).model_dump(mode="json", exclude_none=True)
        except ValidationError as error:
            raise invalid(error, param) from None
        if item["type"] not in ("message", "function_call", "function_call_output"):
            raise ClientEventError(
                f"Items of type '{item['type']}' are not served here.", param=f"{param}.type"
            )
        if item.get("id") and self.find(item["id"]) is not None:
            raise ClientEventError(f"An item with id '{item['id']}' already exists.", param=f"{param}.id")
        item.setdefault("id", new_id("item", "_"))
        item.update(object="realtime.item", status=item.get("status") or "completed")
        return item

    def add(self, entry: Entry, previous_item_id: str | None = None, *, bounded: bool = False) -> str | None:
        """Insert after `previous_item_id` (`root`: first; none: last); the id of the item before it.
        `bounded`: an item a client adds, refused with an error event's error unless the conversation has
        room for it (the server's own items, its answers and the speech it heard, are bounded where they
        are made)."""
        entry.size = len(orjson.dumps(entry.item)) + len(entry.audio or "")
        if bounded and len(self.entries) >= self.max_items:
            raise ClientEventError(
                f"The conversation holds {self.max_items} items, the most it may ([limits] realtime_items): "
                "delete some first.",
                code="conversation_full",
                param="item",
            )
        if bounded and self.size + entry.size > self.max_bytes:
            raise ClientEventError(
                f"The conversation's items would pass {self.max_bytes} bytes, the most they may ([limits] "
                "realtime_conversation_bytes): delete some first.",
                code="conversation_full",
                param="item",
            )
        if previous_item_id is None:
            at = len(self.entries)
        elif previous_item_id == "root":
            at = 0
        else:
            found = self.index(previous_item_id, "previous_item_id")
            at = found + 1
        self.entries.insert(at, entry)
        self._by_id[entry.item["id"]] = entry
        self.size += entry.size
        return self.entries[at - 1].item["id"] if at else None

    def find(self, item_id: str) -> Entry | None:
        return self._by_id.get(item_id)

    def index(self, item_id: str, param: str = "item_id") -> int:
        found = self._by_id.get(item_id)
        if found is not None:
            return next(i for i, entry in enumerate(self.entries) if entry is found)
        raise ClientEventError(
            f"Item with item_id '{item_id}' does not exist.", code="item_not_found", param=param
        )

    def delete(self, item_id: str) -> None:
        del self.entries[self.index(item_id)]
        self.size -= self._by_id.pop(item_id).size

    def last_id(self) -> str | None:
        return self.entries[-1].item["id"] if self.entries else None

    def truncate(self, item_id: str, content_index: int, audio_end_ms: int) -> None:
        """Cut an assistant audio item at `audio_end_ms`: its transcript keeps the clauses heard whole, and
        of the clause cut, the share of its words heard."""
        entry = self.entries[self.index(item_id)]
        content = entry.item.get("content") or []
        if (
            entry.item.get("role") != "assistant"
            or content_index >= len(content)
            or content[content_index].get("type") != "output_audio"
        ):
            raise ClientEventError(
                "Only an assistant's audio content can be truncated.", param="content_index"
            )
        length = entry.spoken[-1].end_ms if entry.spoken else 0.0
        if audio_end_ms > length:
            raise ClientEventError(
                f"audio_end_ms ({audio_end_ms}) is past the end of the item's audio ({length:.0f} ms).",
                param="audio_end_ms",
            )
        kept, start = [], 0.0
        for clause in entry.spoken:
            if clause.end_ms <= audio_end_ms:
                kept.append(clause)
            elif start < audio_end_ms:
                words = clause.text.split()
                share = round(len(words) * (audio_end_ms - start) / (clause.end_ms - start))
                if share:
                    kept.append(Spoken(" ".join(words[:share]), audio_end_ms))
            start = clause.end_ms
        entry.spoken = kept
        content[content_index]["transcript"] = " ".join(c.text for c in kept)

    async def messages(self, entries: list[Entry] | None = None) -> list[dict[str, Any]]:
        """The entries as chat messages (a user's audio waits for its transcript)."""
        messages: list[dict[str, Any]] = []
        for entry in self.entries if entries is None else entries:
            item = entry.item
            if item["type"] == "function_call":
                function = {"name": item["name"], "arguments": item.get("arguments") or "{}"}
                call = {"id": item.get("call_id") or item["id"], "type": "function", "function": function}
                if messages and messages[-1]["role"] == "assistant" and messages[-1].get("tool_calls"):
                    messages[-1]["tool_calls"].append(call)
                else:
                    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            elif item["type"] == "function_call_output":
                messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
            else:
                messages.append({"role": item["role"], "content": await _content(entry)})
        return messages


async def _content(entry: Entry) -> str | list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in entry.item.get("content") or []:
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": part.get("text") or ""})
        elif kind in ("input_audio", "output_audio", "audio"):
            transcript = part.get("transcript")
            if transcript is None and entry.heard is not None:
                # Shielded: a response cancelled while it waits (the user spoke again) must not cancel the
                # transcript, which the item keeps and the next response reads.
                transcript = await asyncio.shield(entry.heard)
            parts.append({"type": "text", "text": transcript or ""})
        elif kind == "input_image" and part.get("image_url"):
            image = {"url": part["image_url"], **({"detail": part["detail"]} if part.get("detail") else {})}
            parts.append({"type": "image_url", "image_url": image})
    if all(p["type"] == "text" for p in parts):
        return " ".join(p["text"] for p in parts if p["text"])
    return parts
