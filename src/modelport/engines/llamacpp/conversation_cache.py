"""ConversationCache' KV cache kept beside llama.cpp's slots, so that a conversation's next turn starts from
its whole history rather than from the system prompt it shares with every other conversation.

llama.cpp keeps idle slots' prompts in RAM and, for a new request, loads the cached prompt sharing the longest
prefix with it. The load moves that prompt out of the cache: with a system prompt shared by all, the first new
conversation takes another's history, overwrites it, and that conversation's next turn finds only the system
prompt again (4 conversations over 2 slots, SmolLM2: every later turn reused 1,570 of ~1,700 prompt tokens).
Here each request (a chat, or a completion) is pinned to an idle slot, into which the saved turn sharing the
longest prefix with it (whole messages, or whole pieces of the prompt) is restored; when it ends, its slot is
saved to a file (llama.cpp's slot save, a copy) named by that prefix, and emptied, so that no idle slot holds
tokens that every request's attention would span in the shared KV cache (which also made seeded answers depend
on what ran before). While other turns run, a slot is not emptied as its turn ends but left holding its
tokens: each emptying is a call through llama.cpp's loop, waiting for its decoding step (45 ms at 32 clients),
and held the slot from the next request that long (one-token answers to one-off prompts at 32 clients: 51 a
second against llama-server's 119). The next turn placed there goes on from what its prompt shares with those
tokens, as llama.cpp's own placing would (beside other turns an answer depends on what runs with it anyway;
telling llama.cpp to drop them instead, `cache_prompt` off, cost as much as the emptying), with nothing
restored where they hold as much of it as any file; a turn goes to the slot its own last turn was left in
first (`_take`). The last turn to end empties every slot so left. The save and the emptying come after the
answer's end has been told (a next turn of the conversation that comes first waits for the save), and a
request that finds no other running waits for them, so that it decodes beside nobody's tokens as before while
no answer's end waits for either. The one exception is the last turn to end while no other ran (one user's
chat, one agent's loop): it rests in its slot, unsaved for `REST_UNSAVED` seconds and then saved, for its
conversation's next turn to go on there with nothing saved first or restored; any other request first saves it
(unless saved) and, where their prompts begin alike (a system prompt, a template's long preamble, the tools: a
prefix both are named by), goes on in its slot from what the two share, unless a saved turn holds more of its
messages. llama.cpp reuses the longest prefix a restored slot's tokens share with the new prompt, so a stale
or mismatched file costs speed, never correctness."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from modelport import metrics
from modelport.engines.llamacpp.launch import SideDoor

log = logging.getLogger("modelport.llamacpp")

_PREFIX = "modelport-slots-"  # then the process id, a dash and a random tail
# How a turn began (`modelport_conversation_turns_total`).
_STARTS = ("restored", "resumed", "shared", "fresh", "left")
LONE_SEEN = 1024  # lone requests remembered, so that one sent again is kept from then on
# A lone message this long is kept at its first sending: reading it again costs more than saving it.
LONE_KEPT_CHARS = 4096
EMPTYING_WAIT = 5.0  # seconds a request alone waits for ended turns' slots to be emptied, at most
SAVE_WAIT = 5.0  # seconds a turn waits for the save of the turn it continues, at most
# Seconds a resting turn stays unsaved: a next turn sent sooner (an agent's next round, a tool's result)
# spares its save (50-70 ms for 2,000 tokens of SmolLM2); another request sent sooner pays it.
REST_UNSAVED = 0.5


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
    """One request's place: the slot a saved turn was restored into (held for it until it ends), and the
    names its own turn will be saved under."""

    def __init__(
        self,
        cache: ConversationCache,
        names: list[str],
        slot: int | None,
        restored: str | None,
        stays: bool = False,
        lone: bool = False,
    ) -> None:
        self._cache = cache
        self.names = names
        self.slot = slot
        self.restored = restored
        self.stays = stays  # what it leaves in its slot stays there (llama.cpp cannot save it)
        self.lone = lone  # a lone request sent for the first time: saved only if it ends alone

    def ended(self, reported: int | None, completed: bool) -> Callable[[], None]:
        """Called as the turn's generation ends, before its stream does; what it returns, to be called once
        the end has been told, saves the slot the turn ran in (if it completed), empties it and frees it. A
        next turn of the conversation that comes before the save is done waits for it (`place`)."""
        slot = self.slot
        if slot is None:
            self._cache.left_ended(reported, self.stays)
            # A slot llama.cpp chose is touched only if no other turn has been placed in it since.
            if self.stays or reported is None or not self._cache.claim(reported):
                return self._cache.finished(None, empty=False)
            slot = reported
        try:
            idle = self._cache.idle(slot)  # llama.cpp would wait for a slot another request took
            # The same messages sent again (a retry, a prompt used over and over) were restored from the
            # file that holds them: saved again, each such turn copied what is kept already through
            # llama.cpp's loop, between its decode steps (at 8 streams, 28 ms a turn).
            again = bool(self.names) and self.restored == self.names[-1]
            # A lone request's save would be taken from the others' decoding: it is saved only where there
            # are none (one user's chat, whose next turn then reads nothing again).
            spared = not self.lone or self._cache.alone()
            kept = None
            if idle and completed and self.names and spared:
                # The file restored is this conversation's earlier turn only if its messages lead here.
                kept = Kept(self.names, self.restored if self.restored in self.names else None, saved=again)
        except BaseException:
            self._cache.finished(slot, empty=False)()
            raise
        return self._cache.finished(slot, empty=idle, kept=kept, names=self.names)


class Kept:
    """A turn to be saved once its answer's end has been told: its names, the file it supersedes (its
    conversation's earlier turn), whether it is saved (restored from the file of its very messages, it is
    already) and whether a save under way is done (a next turn may be waiting for it)."""

    def __init__(self, names: list[str], superseded: str | None, saved: bool = False) -> None:
        self.names = names
        self.superseded = superseded
        self.saved = saved
        self.done = threading.Event()


class Resting:
    """The last turn to end while no other ran, left in its slot (held for it) for its conversation's next
    turn; saved once it has rested `REST_UNSAVED` seconds, or by a request that needs its slot."""

    def __init__(self, slot: int, kept: Kept) -> None:
        self.slot = slot
        self.kept = kept
        self.timer: threading.Timer | None = None  # till its save


def _rested(cache: weakref.ref[ConversationCache], resting: Resting) -> None:
    """The timer's end: save the turn if it still rests (a timer keeps no unloaded model alive)."""
    alive = cache()
    if alive is not None:
        alive.settle(resting)


class ConversationCache:
    """Saved turns of one llama.cpp server, at most `budget` bytes of files in `where`, least
    recently used dropped first; the folder goes when the model is unloaded or the process exits.

    Every turn is pinned to an idle slot chosen here while one is free, so that llama.cpp never hands a
    slot being restored for one request to another; each slot is saved and emptied when its turn ends,
    but the one a turn rests in."""

    def __init__(self, door: SideDoor, where: Path, budget: int, gguf: str) -> None:
        self._door = door
        self._began = {start: metrics.CONVERSATION_TURNS.labels(gguf, start) for start in _STARTS}
        self._saved = metrics.CONVERSATION_SAVES.labels(gguf)
        self._erased = metrics.CONVERSATION_ERASES.labels(gguf)
        self._where = where
        self._budget = budget
        self._files: OrderedDict[str, tuple[int, list[str]]] = OrderedDict()  # least recently used first
        self._holders: dict[str, str] = {}  # a prefix's name -> the latest file that begins with it
        self._reserved: set[int] = set()
        self._slots = len(door.get("/slots"))
        self._others = 0  # requests left to llama.cpp, running
        self._holding: set[int] = set()  # slots where such requests left what they held
        # Slots whose turn ended while others ran, not emptied yet -> the names of the turn each holds.
        self._left_full: dict[int, list[str]] = {}
        self._lone: OrderedDict[str, None] = OrderedDict()  # lone requests seen, least recently first
        self._running = 0  # turns begun and not yet ended
        self._emptying = 0  # ended turns whose slots are still to be saved or emptied
        self._saving: dict[str, Kept] = {}  # a prefix's name -> the turn being saved under it
        self._resting: Resting | None = None  # only while no turn runs, or a request is taking it
        self._putting_away = 0  # resting turns being saved and emptied for a request that came
        self._lock = threading.Lock()
        self._emptied = threading.Condition(self._lock)
        weakref.finalize(self, shutil.rmtree, where, ignore_errors=True)

    def leave(self, request: dict[str, Any]) -> Turn:
        """Leave `request` to llama.cpp, which keeps what it holds in its slot afterwards (a conversation
        with images or sound: llama.cpp cannot save those, but reuses them while they stay)."""
        self._begin()
        resting, _ = self._woken(None)
        if resting is not None:
            self._put_away(resting)
        else:
            self._put_away_done()
        return self._left(request, [], stays=True)

    def _left(
        self, request: dict[str, Any], names: list[str], stays: bool = False, lone: bool = False
    ) -> Turn:
        """A turn llama.cpp places itself, asked to say in which slot (`verbose`); while one runs, which
        slots are idle is asked of llama.cpp rather than known here."""
        request["verbose"] = True
        self._began["left"].inc()
        with self._lock:
            self._others += 1
        return Turn(self, names, None, None, stays, lone)

    def _begin(self) -> None:
        """Count a turn in. One that finds no other running first waits for the slots of turns just ended
        to be emptied, so that a request sent alone decodes beside no other's tokens (greedy answers then
        do not depend on what ran before); beside running turns it would anyway."""
        with self._emptied:
            if not self._running:
                self._emptied.wait_for(lambda: not self._emptying, timeout=EMPTYING_WAIT)
            self._running += 1

    def finished(
        self, slot: int | None, empty: bool, kept: Kept | None = None, names: list[str] | None = None
    ) -> Callable[[], None]:
        """Count a turn out; what is left to do once its answer's end has been told: save the slot it held
        (`kept`: an answer's end never waits for its copy), empty it (if `empty`; or, while other turns run,
        leave it holding the turn's `names`) and free it."""
        with self._lock:
            self._running -= 1
            if slot is None and not (self._left_full and self._none_runs()):
                return lambda: None
            self._emptying += 1
            if kept is not None and not kept.saved:
                self._saving.update(dict.fromkeys(kept.names, kept))
        if slot is None:  # a turn llama.cpp placed, the last to end: the slots others left full are emptied
            return self._tidied(self._empty_left_full)

        def tidy() -> None:
            rests = False
            try:
                rests = empty and kept is not None and self._rest(slot, kept)
                if kept is not None and not rests and not kept.saved:
                    self._save_kept(slot, kept)
                if empty and not rests and not self._left_full_while_busy(slot, names or []):
                    self.erase(slot)
                self._empty_left_full()  # if this was the last turn running
            finally:
                if not rests:  # a resting turn keeps its slot held
                    with self._lock:
                        self._reserved.discard(slot)

        return self._tidied(tidy)

    def _tidied(self, work: Callable[[], None]) -> Callable[[], None]:
        """`work` counted as an ended turn's emptying (a request sent alone waits for it)."""

        def tidy() -> None:
            try:
                work()
            finally:
                with self._emptied:
                    self._emptying -= 1
                    self._emptied.notify_all()

        return tidy

    def _left_full_while_busy(self, slot: int, names: list[str]) -> bool:
        """Leave an ended turn's tokens in its slot, for the next turn placed there to go on from, or for
        the last turn to end to empty, if other turns run; a turn that goes on from them (its
        conversation's next, the same prompt again) is placed there (`_take`)."""
        with self._lock:
            if self._none_runs():
                return False
            self._left_full[slot] = names
            return True

    def _empty_left_full(self) -> None:
        """Empty the slots turns left full while others ran, now that none runs (held meanwhile, so that no
        turn is placed in a slot being emptied; one sent alone waits for this, as for any ended turn's
        emptying)."""
        with self._lock:
            if not self._none_runs():
                return
            full = self._left_full.keys() - self._reserved
            for slot in full:
                del self._left_full[slot]
            self._reserved |= full
        try:
            for slot in sorted(full):
                self.erase(slot)
        finally:
            with self._lock:
                self._reserved -= full

    def _rest(self, slot: int, kept: Kept) -> bool:
        """Leave an ended turn in its slot, unsaved for now, if no other turn runs."""
        resting = Resting(slot, kept)
        with self._lock:
            if not self._none_runs() or self._resting is not None:
                return False
            self._resting = resting
            self._unlisted(kept)  # nobody waits for a save put off
        if not kept.saved:
            resting.timer = threading.Timer(REST_UNSAVED, _rested, (weakref.ref(self), resting))
            resting.timer.daemon = True
            resting.timer.start()
        return True

    def settle(self, resting: Resting) -> None:
        """Save a turn that has rested unsaved long enough, keeping it in its slot if no turn began since.
        A request alone that comes meanwhile waits for it, as for any ended turn's save."""
        with self._lock:
            if self._resting is not resting or self._running:
                return
            self._resting = None
            self._emptying += 1
        back = False
        try:
            self._save_kept(resting.slot, resting.kept)
            with self._lock:
                back = self._none_runs() and self._resting is None
                if back:
                    self._resting = resting
            if not back:
                self.erase(resting.slot)
        finally:
            with self._emptied:
                if not back:
                    self._reserved.discard(resting.slot)
                self._emptying -= 1
                self._emptied.notify_all()

    def _woken(self, names: list[str] | None) -> tuple[Resting | None, bool]:
        """The resting turn, taken by the request that came (counted in by `_begin`; `names`: its prompt's,
        None where it may not go on from a turn), and whether the request goes on from it; if not, the
        request puts it away, and the requests that come meanwhile wait for that (`_put_away_done`)."""
        with self._lock:
            resting, self._resting = self._resting, None
            went_on = resting is not None and names is not None and resting.kept.names[-1] in names
            if resting is not None and not went_on:
                self._putting_away += 1
        if resting is not None and resting.timer is not None:
            resting.timer.cancel()  # one thread less; `settle` would find the turn taken anyway
        return resting, went_on

    def _put_away(self, resting: Resting, emptied: bool = True) -> None:
        """Save a resting turn (unless saved) and empty its slot, before another request is placed; or, not
        `emptied`, leave the slot as it is and held, for the request that goes on in it."""
        held = False
        try:
            if not resting.kept.saved:
                self._save_kept(resting.slot, resting.kept)
            if emptied:
                self.erase(resting.slot)
            held = not emptied
        finally:
            with self._emptied:
                if not held:
                    self._reserved.discard(resting.slot)
                self._putting_away -= 1
                self._emptied.notify_all()

    def _put_away_done(self) -> None:
        """Wait for a resting turn another request is putting away: begun beside it, this one would decode
        beside its tokens until its slot is emptied (the n choices of one request come together)."""
        with self._emptied:
            self._emptied.wait_for(lambda: not self._putting_away, timeout=EMPTYING_WAIT)

    def _save_kept(self, slot: int, kept: Kept) -> None:
        """Save an ended turn; a next turn of its conversation placed meanwhile waits for it."""
        with self._lock:
            self._saving.update(dict.fromkeys(kept.names, kept))
        try:
            self.save(slot, kept.names, kept.superseded)
        finally:
            with self._lock:
                self._unlisted(kept)
            kept.saved = True
            kept.done.set()

    def _unlisted(self, kept: Kept) -> None:
        """Drop a turn from the saves under way (the caller holds the lock)."""
        for name in kept.names:
            if self._saving.get(name) is kept:
                del self._saving[name]

    def left_ended(self, slot: int | None, stays: bool) -> None:
        with self._lock:
            self._others -= 1
            if slot is not None:
                self._left_full.pop(slot, None)  # llama.cpp placed another turn there
                if stays:
                    self._holding.add(slot)

    def place(self, request: dict[str, Any], names: list[str], lone: bool = False) -> Turn:
        """Pin `request` to an idle slot, into which the saved turn sharing the longest of its prefixes
        (`names`: `conversation_names`' `message_names` or `prompt_names`) is restored, or to the slot its
        conversation's last turn rests in (or another's, for what their prompts share); with no slot
        free, leave it to llama.cpp and ask which slot it used (`verbose`). A turn with no names is
        neither looked up nor saved, only placed and emptied. A `lone` one (a single message, a short
        prompt: most are one-off questions) sent for the first time is saved only if it ends while no
        other turn runs (one user's chat, whose next turn then reads nothing again), since saving every
        one cost free chat throughput; one that is sent again (a retry, a prompt used over and over) is
        kept from its second sending on, and, being short, restored rather than processed again. While other
        turns run, a turn placed in a slot left holding at least as much of its prompt as any file (its own
        last turn, the same prompt, or a new conversation's system prompt) goes on from what the slot holds,
        with nothing restored: a restore is a call through llama.cpp's loop, waiting for its decoding step
        (45 ms at 32 clients)."""
        first = lone and not (names and self._seen_before(names[-1]))
        self._begin()
        # A seeded request processes its whole prompt: it goes on from nothing.
        reuses = bool(names) and request.get("cache_prompt") is not False
        resting, went_on = self._woken(names if reuses else None)
        if resting is not None and went_on:  # its conversation's next turn (or the same sent again)
            request["id_slot"] = resting.slot
            kept = resting.kept
            earlier = kept.names[-1] if kept.saved else kept.superseded
            self._began["resumed"].inc()
            return Turn(self, names, resting.slot, earlier, lone=first)
        if resting is not None and reuses and not set(names).isdisjoint(resting.kept.names):
            return self._share(request, names, resting, first)
        if resting is not None:
            self._put_away(resting)
        else:
            self._put_away_done()
        found = self._holding_file(names) if reuses else None
        with self._lock:
            filed = _reach(names, self._files[found][1]) if found is not None and found in self._files else 0
        slot = self._take(names if reuses else [], filed)
        if slot is None:
            return self._left(request, names, lone=first)
        request["id_slot"] = slot
        with self._lock:
            held = self._left_full.pop(slot, [])  # what it holds is this turn's from now on
            if reuses and _reach(names, held) >= max(filed, 1):
                # Its own last turn, or the same prompt, is kept in the file of its last name, if any.
                earlier = held[-1] if held[-1] in names and held[-1] in self._files else None
                self._began["resumed" if held[-1] in names else "shared"].inc()
                return Turn(self, names, slot, earlier, lone=first)
        restored = found is not None and self._restore(slot, found)
        self._began["restored" if restored else "fresh"].inc()
        return Turn(self, names, slot, found if restored else None, lone=first)

    def _share(self, request: dict[str, Any], names: list[str], resting: Resting, lone: bool) -> Turn:
        """Place a request in the slot of the resting turn it does not go on from, once that turn is saved:
        llama.cpp reuses whatever beginning the two prompts share (a template's preamble, the tools'
        description, a system prompt), where an emptied slot processed it all again (GigaChat 3.1's
        preamble of 1,100 tokens: 3.5 s of SmolLM2 on two cores, every new conversation). A saved turn
        holding more of the request's messages is restored over it. Only where the two prompts share a
        prefix both are named by: sharing less (a role's few tokens) spared nothing, cost a sliding-window
        model a checkpoint's restore (llama.cpp goes back to one to keep the few tokens), and made the
        answer depend on what ran before (a prompt batched otherwise moves the logits' last bits): Gemma 3
        270M, copying a file after an unrelated turn, wrote another greedy text than alone, which its n-gram
        drafts guessed worse: 47 tok/s against 114 (`bench.workload --model gemma3-270m --workloads code`)."""
        self._put_away(resting, emptied=False)
        request["id_slot"] = slot = resting.slot
        found = self._holding_file(names)
        # The file saved from the slot (it holds the same tokens) is the one that shares most, or none is.
        if found is not None and found != resting.kept.names[-1] and self._restore(slot, found):
            self._began["restored"].inc()
            return Turn(self, names, slot, found, lone=lone)
        self._began["shared"].inc()
        return Turn(self, names, slot, None, lone=lone)

    def _holding_file(self, names: list[str]) -> str | None:
        """The saved file holding the longest of these prefixes, once a save of one under way (the turn
        this request continues, ended a moment ago) is done."""
        with self._lock:
            saving = next((self._saving[name] for name in reversed(names) if name in self._saving), None)
        if saving is not None:
            saving.done.wait(SAVE_WAIT)
        with self._lock:
            held = (self._holders.get(name) for name in reversed(names))
            found = next((file for file in held if file in self._files), None)
            if found is not None:
                self._files.move_to_end(found)
        return found

    def _restore(self, slot: int, file: str) -> bool:
        return self._call(f"/slots/{slot}?action=restore", {"filename": f"{file}.bin"})

    def _seen_before(self, name: str) -> bool:
        """Whether a lone request of this name was sent before (and remember it)."""
        with self._lock:
            seen = name in self._lone
            self._lone[name] = None
            self._lone.move_to_end(name)
            if len(self._lone) > LONE_SEEN:
                self._lone.popitem(last=False)
            return seen

    def _take(self, names: list[str], filed: int) -> int | None:
        """An idle slot no turn holds, now held: the one its own last turn (or the same prompt) was left in,
        if it holds at least as much of `names` as the file found for them (`filed` names); else an empty
        one, since a slot that holds tokens holds what llama.cpp keeps for requests left to it (a
        conversation with images) or another conversation's turn, left for its next; else the slot left full
        last. Conversations that take turns (agents beside each other) come back in the order they left, so
        the one that left last comes back last: taking the slot left first took, most often, that of the
        conversation whose turn came next (16 agents over 8 slots: 8 of 96 turns went on in their own slot).
        While every slot runs a turn or is being saved and emptied, it waits for one to be freed: left to
        llama.cpp, the turn would land in a slot whose save is under way, and find none of its history (a
        conversation that sends its next turn as its answer ends, beside another in the other slot)."""
        deadline = time.monotonic() + EMPTYING_WAIT
        while True:
            idle = self._idle_slots() if self._others else None
            with self._emptied:
                if idle is None:  # every slot not held by a turn is idle, empty unless a turn left it full
                    full = self._holding | self._left_full.keys()
                    idle = {slot: int(slot in full) for slot in range(self._slots)}
                order = {slot: at for at, slot in enumerate(self._left_full)}  # the last left, last
                own = {slot: self._own(names, filed, slot) for slot in idle}
                free = sorted(
                    (-own[slot], held, -order.get(slot, -1), slot)
                    for slot, held in idle.items()
                    if slot not in self._reserved
                )
                if free:
                    slot = free[0][3]
                    self._reserved.add(slot)
                    return slot
                left = deadline - time.monotonic()
                if not self._emptying or left <= 0:
                    return None
                self._emptied.wait(left)

    def _own(self, names: list[str], filed: int, slot: int) -> int:
        """How many of `names` a slot left full holds, if it holds its own last turn (or the same prompt)
        and as much of it as the file found (`filed` names); else 0 (the caller holds the lock)."""
        held = self._left_full.get(slot)
        if not held or held[-1] not in names:
            return 0
        reach = _reach(names, held)
        return reach if reach >= filed else 0

    def _none_runs(self) -> bool:
        """Whether no turn runs, placed here or left to llama.cpp (the caller holds the lock)."""
        return not self._running and not self._others

    def alone(self) -> bool:
        """Whether the turn ending now is the only one running (no other placed here or left to llama.cpp)."""
        with self._lock:
            return self._running <= 1 and not self._others

    def idle(self, slot: int) -> bool:
        """Whether a slot held by a turn is idle: unless a request left to llama.cpp runs, it is."""
        return not self._others or slot in self._idle_slots()

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
        self._erased.inc()
        if self._call(f"/slots/{slot}?action=erase", {}):
            with self._lock:
                self._holding.discard(slot)
                self._left_full.pop(slot, None)

    def claim(self, slot: int) -> bool:
        """Hold a slot unless a turn holds it."""
        with self._lock:
            if slot in self._reserved:
                return False
            self._reserved.add(slot)
            return True

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
        self._saved.inc()
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


def _reach(names: list[str], held: list[str]) -> int:
    """How many of a prompt's prefix names (shortest first) a turn named `held` holds: its names are a
    chain, so the longest one shared says every shorter one is."""
    kept = set(held)
    return next((len(names) - at for at, name in enumerate(reversed(names)) if name in kept), 0)
