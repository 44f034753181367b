"""Conversations' KV cache kept beside llama.cpp's slots, so that a conversation's next turn starts from
its whole history rather than from the system prompt it shares with every other conversation.

llama.cpp keeps idle slots' prompts in RAM and, for a new request, loads the cached prompt sharing the
longest prefix with it. The load moves that prompt out of the cache: with a system prompt shared by all,
the first new conversation takes another's history, overwrites it, and that conversation's next turn
finds only the system prompt again (4 conversations over 2 slots, SmolLM2: every later turn reused 1,570
of ~1,700 prompt tokens). Here each finished chat turn's slot is saved to a file (llama.cpp's slot
save, a copy) named by its messages; a request whose messages continue a saved turn's has that file
restored into an idle slot and is sent to it. llama.cpp then reuses the longest prefix its tokens share
with the new prompt, so a stale or mismatched file costs speed, never correctness.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

import httpx

from modelport.engines.llamacpp.launch import SideDoor

log = logging.getLogger("modelport.llamacpp")


def folder() -> Path:
    """A new folder for saved slots: in RAM (`/dev/shm`) where there is one."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="modelport-slots-", dir=shm if os.access(shm, os.W_OK) else None))


class Turn:
    """One chat request's place: the slot a saved history was restored into (if any), and the name its
    own history will be saved under once it ends."""

    def __init__(self, cache: Conversations, name: str, slot: int | None, restored: str | None) -> None:
        self._cache = cache
        self.name = name
        self.slot = slot
        self.restored = restored

    def ended(self, reported: int | None) -> None:
        """Save the slot the turn ran in (called once its answer is complete, off the reader's path)."""
        slot = self.slot if self.slot is not None else reported
        if isinstance(slot, int):
            self._cache.save(slot, self.name, superseded=self.restored)


class Conversations:
    """Saved chat histories of one llama.cpp server, at most `budget` bytes of files in `where`, least
    recently used dropped first; the folder goes when the model is unloaded or the process exits."""

    def __init__(self, door: SideDoor, where: Path, budget: int) -> None:
        self._door = door
        self._where = where
        self._budget = budget
        self._files: OrderedDict[str, int] = OrderedDict()  # name -> bytes, least recently used first
        self._lock = threading.Lock()
        weakref.finalize(self, shutil.rmtree, where, ignore_errors=True)

    def place(self, request: dict[str, Any]) -> Turn | None:
        """Restore the longest saved history that `request`'s messages continue into an idle slot and pin
        the request to it; otherwise ask llama.cpp to say which slot it used (`verbose`)."""
        names = _prefix_names(request)
        if not names:
            return None
        with self._lock:
            found = next((name for name in reversed(names) if name in self._files), None)
            if found is not None:
                self._files.move_to_end(found)
        slot = self._restore(found) if found is not None else None
        if slot is None:
            request["verbose"] = True
            return Turn(self, names[-1], None, None)
        request["id_slot"] = slot
        return Turn(self, names[-1], slot, found)

    def _restore(self, name: str) -> int | None:
        try:
            idle = [slot["id"] for slot in self._door.get("/slots") if not slot["is_processing"]]
            if not idle:
                return None
            reply = self._door.post(f"/slots/{idle[-1]}?action=restore", {"filename": f"{name}.bin"})
        except httpx.HTTPError as error:
            log.debug("restoring a conversation failed: %s", error)
            return None
        return int(idle[-1]) if reply.status_code == 200 else None

    def save(self, slot: int, name: str, superseded: str | None) -> None:
        try:
            reply = self._door.post(f"/slots/{slot}?action=save", {"filename": f"{name}.bin"})
        except httpx.HTTPError as error:
            log.debug("saving a conversation failed: %s", error)
            return
        if reply.status_code != 200 or not reply.json().get("n_saved"):
            return  # a prompt with images (llama.cpp cannot serialise those), or a slot already cleared
        size = (self._where / f"{name}.bin").stat().st_size
        with self._lock:
            dropped: list[str] = []
            if superseded is not None and superseded != name and self._files.pop(superseded, 0):
                dropped.append(superseded)
            self._files[name] = size
            self._files.move_to_end(name)
            while len(self._files) > 1 and sum(self._files.values()) > self._budget:
                dropped.append(self._files.popitem(last=False)[0])
        for old in dropped:
            (self._where / f"{old}.bin").unlink(missing_ok=True)


def _prefix_names(request: dict[str, Any]) -> list[str]:
    """A name for each prefix of the request's messages, shortest first, each depending on what else
    shapes the prompt (template variables such as the tools)."""
    digest = hashlib.sha256(json.dumps(request.get("chat_template_kwargs"), sort_keys=True).encode())
    names = []
    for message in request["messages"]:
        digest.update(json.dumps(message, sort_keys=True).encode())
        names.append(digest.hexdigest()[:40])
    return names
