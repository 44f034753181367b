"""Which slot a request goes to, so that a conversation's next turn reuses what its last one computed.

llama.cpp keeps prompts in RAM (`cache_ram_mib`) and, by default, picks for a request the idle slot whose
prompt is most similar; it reads the RAM cache only when it takes the least recently used slot instead.
With many conversations behind one long system prompt every slot looks similar, so the RAM cache was never
read: measured with 4 conversations over 2 slots, every turn after the first processed its whole history
again (1,491 of 1,764 prompt tokens cached, the system prompt alone). So the engine starts llama.cpp with
similarity off and idle slots left as they are: a request takes the least recently used slot, whose prompt
is first saved to RAM, and loads the best match from RAM — its own history, or at least the system prompt
it shares (1,639 of 1,764 cached). What RAM cannot give is the history still in the slot of the request
that finished last; `SlotPlanner` sends a turn that continues a request still held by its slot to that
slot by id.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelport.engines.llamacpp.chunk_stream import ChunkHandler


@dataclass
class _Slot:
    holds: tuple[Any, ...] = ()  # what its last request asked: message digests, or the prompt
    busy: bool = False  # a request was sent to it by id and has not finished


class SlotPlanner:
    """What each slot of one llama.cpp server holds, from the slot each request reports it ran on."""

    def __init__(self, slots: int) -> None:
        self._slots = [_Slot() for _ in range(slots)]
        self._lock = threading.Lock()

    def handler(self, handle: ChunkHandler) -> ChunkHandler:
        """`handle`, with a continuing request sent to its slot and every request's slot recorded."""

        def placed(request: dict[str, Any], on_chunk: Callable[[dict[str, Any]], bool]) -> Any:
            asked = _asked(request)
            with self._lock:
                slot = self._continued(asked)
                if slot is not None:
                    self._slots[slot].busy = True
            landed: list[int] = []

            def seen(chunk: dict[str, Any]) -> bool:
                verbose = chunk.pop("__verbose", None) if isinstance(chunk, dict) else None
                if isinstance(verbose, dict) and isinstance(verbose.get("id_slot"), int):
                    landed.append(verbose["id_slot"])
                return on_chunk(chunk)

            pinned = {"id_slot": slot} if slot is not None else {}
            try:
                return handle({**request, **pinned, "verbose": True}, seen)
            finally:
                with self._lock:
                    if slot is not None:
                        self._slots[slot].busy = False
                    if landed and 0 <= landed[-1] < len(self._slots):
                        self._slots[landed[-1]] = _Slot(asked)

        return placed

    def _continued(self, asked: tuple[Any, ...]) -> int | None:
        """The idle slot whose last request this one continues, if any."""
        for index, slot in enumerate(self._slots):
            if not slot.busy and slot.holds and _continues(asked, slot.holds):
                return index
        return None


def _asked(request: dict[str, Any]) -> tuple[Any, ...]:
    """A request's conversation as comparable parts: a digest per message, or the prompt's text or ids."""
    if "messages" in request:
        return ("messages", *(hash(json.dumps(m, sort_keys=True, default=str)) for m in request["messages"]))
    prompt = request.get("prompt")
    return ("prompt", prompt if isinstance(prompt, str) else tuple(prompt or ()))


def _continues(asked: tuple[Any, ...], held: tuple[Any, ...]) -> bool:
    """Whether a request goes on from where an earlier one ended: more messages after the same ones, or a
    longer prompt beginning with the same text or ids."""
    if asked[0] != held[0]:
        return False
    if asked[0] == "prompt":
        now, before = asked[1], held[1]
        return type(now) is type(before) and len(now) > len(before) and now[: len(before)] == before
    return len(asked) > len(held) and asked[: len(held)] == held
