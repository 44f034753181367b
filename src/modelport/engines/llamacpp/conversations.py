"""Conversations' KV cache kept beside llama.cpp's slots, so that a conversation's next turn starts from
its whole history rather than from the system prompt it shares with every other conversation.

llama.cpp keeps idle slots' prompts in RAM and, for a new request, loads the cached prompt sharing the
longest prefix with it. The load moves that prompt out of the cache: with a system prompt shared by all,
the first new conversation takes another's history, overwrites it, and that conversation's next turn
finds only the system prompt again (4 conversations over 2 slots, SmolLM2: every later turn reused 1,570
of ~1,700 prompt tokens). Here each chat request is pinned to an idle slot, into which the saved turn
sharing the longest run of messages with it is restored; when it ends, its slot is saved to a file
(llama.cpp's slot save, a copy) named by its messages, and emptied. llama.cpp reuses the longest prefix
a restored slot's tokens share with the new prompt, so a stale or mismatched file costs speed, never
correctness.
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

_PREFIX = "modelport-slots-"  # then the process id, a dash and a random tail


def folder(budget: int) -> Path:
    """A new folder for saved slots: in RAM (`/dev/shm`) where there is one with room for `budget` bytes
    (a container's is often 64 MiB), else in the temporary folder. Folders left by processes that are
    gone (killed, or ended without finalising) are removed first: in `/dev/shm` they hold memory."""
    shm = Path("/dev/shm")
    for place in (shm, Path(tempfile.gettempdir())):
        for left in place.glob(f"{_PREFIX}*-*"):
            pid = left.name.removeprefix(_PREFIX).split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(left, ignore_errors=True)
    roomy = os.access(shm, os.W_OK) and shutil.disk_usage(shm).free >= budget
    return Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=shm if roomy else None))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class Turn:
    """One chat request's place: the slot a saved history was restored into (held for it until it ends),
    and the names its own history will be saved under."""

    def __init__(
        self, cache: Conversations, names: list[str], slot: int | None, restored: str | None
    ) -> None:
        self._cache = cache
        self.names = names
        self.slot = slot
        self.restored = restored

    def ended(self, reported: int | None, completed: bool) -> None:
        """Save the slot the turn ran in, if it completed, and empty it (called off the reader's path,
        before the stream ends, so that a caller's next turn finds it saved and the slots empty)."""
        slot = self.slot if self.slot is not None else reported
        # A slot llama.cpp chose is touched only if no other turn has been placed in it since.
        if slot is None or (self.slot is None and not self._cache.claim(slot)):
            return
        try:
            if self._cache.idle(slot):  # llama.cpp would wait for a slot another request took
                if completed and self.names:
                    # The file restored is this conversation's earlier turn only if its messages lead here.
                    earlier = self.restored if self.restored in self.names else None
                    self._cache.save(slot, self.names, superseded=earlier)
                self._cache.erase(slot)
        finally:
            self._cache.release(slot)


class Conversations:
    """Saved chat histories of one llama.cpp server, at most `budget` bytes of files in `where`, least
    recently used dropped first; the folder goes when the model is unloaded or the process exits.

    Every turn is pinned to an idle slot chosen here while one is free, so that llama.cpp never hands a
    slot being restored for one request to another; each slot is saved and emptied when its turn ends."""

    def __init__(self, door: SideDoor, where: Path, budget: int) -> None:
        self._door = door
        self._where = where
        self._budget = budget
        self._files: OrderedDict[str, tuple[int, list[str]]] = OrderedDict()  # least recently used first
        self._holders: dict[str, str] = {}  # a prefix's name -> the latest file that begins with it
        self._reserved: set[int] = set()
        self._lock = threading.Lock()
        weakref.finalize(self, shutil.rmtree, where, ignore_errors=True)

    def place(self, request: dict[str, Any], keep: bool = True) -> Turn:
        """Pin `request` to an idle slot, into which the saved history sharing the longest prefix of
        messages with it is restored; with no slot free, leave it to llama.cpp and ask which slot it
        used (`verbose`). A turn not to `keep` is neither looked up nor saved, only placed and emptied."""
        names = _prefix_names(request) if keep else []
        slot = self._take()
        if slot is None:
            request["verbose"] = True
            return Turn(self, names, None, None)
        request["id_slot"] = slot
        if not names or request.get("cache_prompt") is False:  # a seeded request processes its whole prompt
            return Turn(self, names, slot, None)
        with self._lock:
            held = (self._holders.get(name) for name in reversed(names))
            found = next((file for file in held if file in self._files), None)
            if found is not None:
                self._files.move_to_end(found)
        restored = found is not None and self._call(
            f"/slots/{slot}?action=restore", {"filename": f"{found}.bin"}
        )
        return Turn(self, names, slot, found if restored else None)

    def _take(self) -> int | None:
        """An idle slot no turn holds, now held: an empty one first, since a slot that holds tokens holds
        what llama.cpp keeps for requests left to it (a conversation with images, a completion)."""
        idle = self._idle_slots()
        with self._lock:
            free = sorted((held, slot) for slot, held in idle.items() if slot not in self._reserved)
            if not free:
                return None
            slot = free[0][1]
            self._reserved.add(slot)
            return slot

    def idle(self, slot: int) -> bool:
        return slot in self._idle_slots()

    def _idle_slots(self) -> dict[int, int]:
        """The slots llama.cpp is not processing a request in, each with how many tokens it holds (none,
        if it cannot be asked)."""
        try:
            slots = self._door.get("/slots")
        except httpx.HTTPError as error:
            log.debug("reading the slots failed: %s", error)
            return {}
        idle = (slot for slot in slots if not slot["is_processing"])
        return {int(slot["id"]): int(slot.get("n_prompt_tokens", 0)) for slot in idle}

    def erase(self, slot: int) -> None:
        """Empty a slot, so that idle slots hold no tokens that every request's attention would span in
        the shared KV cache (its turn is saved)."""
        self._call(f"/slots/{slot}?action=erase", {})

    def claim(self, slot: int) -> bool:
        """Hold a slot unless a turn holds it."""
        with self._lock:
            if slot in self._reserved:
                return False
            self._reserved.add(slot)
            return True

    def release(self, slot: int) -> None:
        with self._lock:
            self._reserved.discard(slot)

    def _call(self, route: str, body: dict[str, Any]) -> bool:
        try:
            return self._door.post(route, body).status_code == 200
        except httpx.HTTPError as error:
            log.debug("%s failed: %s", route, error)
            return False

    def save(self, slot: int, names: list[str], superseded: str | None) -> None:
        name = names[-1]
        try:
            reply = self._door.post(f"/slots/{slot}?action=save", {"filename": f"{name}.bin"})
            # Not saved: a prompt with images (llama.cpp cannot serialise those), or a slot already cleared.
            if reply.status_code != 200 or not reply.json().get("n_saved"):
                return
            size = (self._where / f"{name}.bin").stat().st_size
        except (httpx.HTTPError, OSError, ValueError) as error:
            log.debug("saving a conversation failed: %s", error)
            return
        with self._lock:
            self._files[name] = (size, names)
            self._files.move_to_end(name)
            self._holders.update(dict.fromkeys(names, name))
            dropped: list[str] = []
            if superseded is not None and superseded != name and superseded in self._files:
                dropped.append(superseded)
                self._forget(superseded)
            while len(self._files) > 1 and sum(size for size, _ in self._files.values()) > self._budget:
                dropped.append(next(iter(self._files)))  # the least recently used
                self._forget(dropped[-1])
        for old in dropped:
            (self._where / f"{old}.bin").unlink(missing_ok=True)

    def _forget(self, file: str) -> None:
        """Drop a file from the index (the caller holds the lock, and deletes it)."""
        for prefix in self._files.pop(file)[1]:
            if self._holders.get(prefix) == file:
                del self._holders[prefix]


def _prefix_names(request: dict[str, Any]) -> list[str]:
    """A name for each prefix of the request's messages, shortest first, each depending on what else
    shapes the prompt (template variables such as the tools)."""
    digest = hashlib.sha256(json.dumps(request.get("chat_template_kwargs"), sort_keys=True).encode())
    names = []
    for message in request["messages"]:
        digest.update(json.dumps(message, sort_keys=True).encode())
        names.append(digest.hexdigest()[:40])
    return names
