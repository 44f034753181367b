"""llama.cpp's streaming handlers as iterators: a blocking handler reports each chunk through a callback in
a thread of its own; `ChunkStream` hands the chunks on, to blocking or async readers, and its `close()`
stops the generation at the next token and frees the slot. llama.cpp's refusals become typed errors, but
one: where llama.cpp reads the model's format itself and the model strayed from it, the answer ends as it
stands (a warning, not a 500).

A process that ends while a generation runs stops it and waits for its thread first (`stop_all`, at exit):
a thread still inside llama.cpp when Python finalises is unwound by `pthread_exit` as it takes the GIL for
its next chunk, through llama.cpp's `catch (...)`, and the process aborts (`FATAL: exception not
rethrown`, exit 134) — an application that left a stream unread, or a test run, after all had gone well."""

from __future__ import annotations

import asyncio
import atexit
import logging
import math
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from modelport import context
from modelport.engines.llamacpp import repetition
from modelport.errors import InvalidRequestError, ModelportError, PredictorError

log = logging.getLogger("modelport.llamacpp")

ChunkHandler = Callable[[dict[str, Any], Callable[[dict[str, Any]], bool]], Any]
# Told a generation's slot (if llama.cpp said) and whether it completed, before the stream ends; what it
# returns is called after the end is told.
Ended = Callable[[int | None, bool], Callable[[], None]]

_DONE: Any = object()
_TEMPLATE_REFUSAL = re.compile(r"Jinja Exception: (.+)")
# llama.cpp's reading of a chat answer in the model's format, refusing what the model wrote.
_STRAYED = "does not match the expected"
_EXIT_WAIT = 30.0  # seconds a process that ends waits for its generations to stop (a long prompt's prefill)
_LIVE: set[ChunkStream] = set()  # generations whose thread has not ended
_LIVE_LOCK = threading.Lock()
_EXITING = threading.Event()


def stream_chunks(
    handle: ChunkHandler, request: dict[str, Any], ended: Ended | None = None, pace: float = 0.0
) -> ChunkStream:
    """Run a blocking streaming handler in a thread and return its chunks as they come (to an async reader
    at most once every `pace` seconds while they come faster: `ChunkStream.bunch`); `ended` is called
    in that thread once the generation has ended, before the stream does, with the slot it ran in if
    llama.cpp said (a request with `verbose`) and whether it completed without error; what it returns
    is called after the stream's end. A generation is watched for repetition (`repetition`)."""
    request = {**request, "stream": True, "stream_options": {"include_usage": True}}
    watch = repetition.watch_of(request)
    if watch is not None:
        request["timings_per_token"] = True  # the usage so far, should the repetition stop end it early
    stream = ChunkStream(watch)
    stream.bunch(pace)
    with _LIVE_LOCK:
        _LIVE.add(stream)

    def run() -> None:
        completed = False
        after: Callable[[], None] | None = None  # none if `ended` failed
        try:
            handle(request, stream.on_chunk)
            completed = not stream.failed
            if stream.looped is not None:
                stream.put(stream.looped)
        except Exception as error:
            stream.put(error)
        finally:
            try:  # before the end is told: a caller's next turn may not take the slot before it is saved
                if ended is not None and not _EXITING.is_set():  # the process ends: nothing to keep
                    after = ended(stream.slot, completed)
            finally:
                stream.put(_DONE)
                try:
                    if after is not None:
                        after()
                finally:
                    with _LIVE_LOCK:
                        _LIVE.discard(stream)

    # Validation errors (a bad grammar, an over-long prompt) surface on the first chunk, before any text.
    # A daemon: a process does not wait for a generation nobody reads; `stop_all` ends them at exit.
    stream.thread = threading.Thread(target=run, name="llamacpp-request", daemon=True)
    stream.thread.start()
    return stream


@atexit.register
def stop_all(wait: float = _EXIT_WAIT) -> None:
    """Stop every generation under way at its next token and wait (`wait` seconds at most) for their
    threads to leave llama.cpp. What a generation's end would keep (its conversation's cache) is not kept:
    the process ends."""
    _EXITING.set()
    with _LIVE_LOCK:
        live = list(_LIVE)
    for stream in live:
        stream.close()
    deadline = time.monotonic() + wait
    for stream in live:
        if stream.thread is not None:
            stream.thread.join(max(0.0, deadline - time.monotonic()))
    left = sum(1 for stream in live if stream.thread is not None and stream.thread.is_alive())
    if left:
        log.warning("%d llama.cpp generations did not stop within %.0f s of the process ending", left, wait)


class ChunkStream:
    """The chunks of one generation, read blocking (`for`) or from an event loop (`async for`). The
    async side is woken by llama.cpp's thread directly, with no worker-thread hop per token; `close()`
    stops the generation at its next token and frees the slot. A reader that wants only the whole answer
    may have the chunks handed over in bunches (`bunch`)."""

    def __init__(self, watch: repetition.Repetition | None = None) -> None:
        self._watch = watch
        self.looped: dict[str, Any] | None = None  # the last chunk, once the repetition stop ended it
        self._items: deque[Any] = deque()
        self._ready = threading.Condition()
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None
        self._pace: _Pace | None = None  # hand-overs to an async reader at most once a pace while it flows
        self._handed = False  # whether the async reader was handed chunks yet (the first go at once)
        self._timed = False  # a timer on the reader's loop hands over what comes before it fires
        self._cancelled = threading.Event()
        self._ended = False
        self.slot: int | None = None
        self.failed = False
        self._last: dict[str, Any] | None = None  # the last chunk, for an answer that ends as it stands
        self.strayed: str | None = None  # what llama.cpp said of an answer that strayed from its format
        self.thread: threading.Thread | None = None  # the generation's, calling `on_chunk`

    def on_chunk(self, chunk: dict[str, Any]) -> bool:
        """llama.cpp's callback: keep the chunk; True tells llama.cpp to stop this generation."""
        if "__verbose" in chunk:  # llama.cpp's own account of the request, asked for its slot
            self.slot = chunk.pop("__verbose").get("id_slot")
        error = chunk.get("error")
        if isinstance(error, dict) and _STRAYED in str(error.get("message")):
            self.strayed = str(error.get("message"))
            chunk = _ending(
                self._last or {"object": "chat.completion.chunk", "choices": [{"delta": {}}]}, "stop"
            )
        elif error is None:
            self._last = chunk
        self.failed = self.failed or "error" in chunk
        if self._watch is not None and not self.failed:
            if self.looped is not None:
                return True  # what llama.cpp still sends after the stop is not part of the answer
            piece = _piece(chunk)
            if piece is not None and self._watch.looping(piece):
                self.looped = _ending(chunk, "length")
        self.put(chunk)
        return self._cancelled.is_set() or self.looped is not None

    def bunch(self, seconds: float) -> None:
        """Hand the chunks to an async reader in bunches, at most once every `seconds` while chunks come
        faster than that (the first, the end and a failure at once; one that comes after a longer gap at
        once too). A wake-up from llama.cpp's thread costs a 2-core machine's serving thread more than the
        token's own handling does; a bunch's is shared, and a timer on the reader's own loop hands it over,
        so a steady stream wakes the loop from outside not at all. The pace is kept by every stream at
        these `seconds` together (`_Pace`): eight streams decoded side by side, each token more than a
        pace after its stream's last, are handed over together on the pace's ticks, one wake-up for all,
        where each token woke the loop (90–105 wake-ups a second, 35–49 now)."""
        self._pace = _pace(seconds) if seconds else None

    def put(self, item: Any) -> None:
        with self._ready:
            self._items.append(item)
            self._ready.notify()
            chunk = isinstance(item, dict) and "error" not in item
            if chunk and self._pace is not None:
                self._pace.came(time.monotonic())
            if self._waiter is None or (chunk and self._timed):  # the reader is busy, or its timer will come
                return
            waiter, self._waiter, self._timed, self._handed = self._waiter, None, False, True
        waiter[0].call_soon_threadsafe(_wake, waiter[1])

    def _wait(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """The reader's wait for the next chunk (the lock held): woken by the chunk, or, once its first was
        handed over and while the pace's chunks come faster than a bunch's time, at the pace's next tick."""
        future = loop.create_future()
        self._waiter, self._timed = (loop, future), False
        if self._pace is not None and self._handed and self._pace.flows():
            self._at_tick(self._pace, loop, future)
        return future

    def _at_tick(self, pace: _Pace, loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
        """Hand over at the pace's next tick what will have come by then (the lock held)."""
        self._timed = True
        loop.call_at(pace.tick(loop.time()), self._hand_over, future)

    def _hand_over(self, future: asyncio.Future[None]) -> None:
        """On the reader's loop, a tick of the pace: hand over what came since the last hand-over; if nothing
        did, wait for the next tick while the pace's chunks still come (another stream's), else (the
        generation paused) the next chunk wakes the reader at once."""
        with self._ready:
            if self._waiter is None or self._waiter[1] is not future:
                return
            self._timed = False
            if not self._items:
                if self._pace is not None and self._pace.flowing(time.monotonic()):
                    self._at_tick(self._pace, self._waiter[0], future)
                return
            self._waiter = None
        _wake(future)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        with self._ready:
            while not self._items and not self._ended:
                self._ready.wait()
            item = self._items.popleft() if self._items else _DONE
        return self._unwrap(item, StopIteration)

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while True:
            with self._ready:
                if self._items or self._ended:
                    item = self._items.popleft() if self._items else _DONE
                    break
                future = self._wait(asyncio.get_running_loop())
            await future
        return self._unwrap(item, StopAsyncIteration)

    def _unwrap(self, item: Any, stop: type[Exception]) -> dict[str, Any]:
        if item is _DONE or isinstance(item, Exception) or "error" in item:
            self._ended = True
            self.close()
            if item is _DONE:
                raise stop
            raise _translate(item) if isinstance(item, Exception) else _translate_body(item["error"])
        item.pop("timings", None)  # llama.cpp's own statistics, not part of OpenAI's chunk
        if self.strayed is not None and item.get("usage"):
            log.warning(
                "request %s: the model strayed from its chat format; its answer ends as it stands "
                "(llama.cpp: %s)",
                context.current().request_id or "-",
                self.strayed,
            )
        return item  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop the generation at its next token."""
        self._cancelled.set()

    async def aclose(self) -> None:
        self.close()


class _Pace:
    """Every stream handed over at one pace (`ChunkStream.bunch`), together: its ticks are whole multiples
    of its seconds on the reader's loop's clock, so the timers of all its streams fire at one wake-up, and
    it flows while its chunks, of whichever stream, come less than a pace apart. Written by llama.cpp's
    threads, read by the loop's: a race between two chunks only blurs a gap."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last = -math.inf  # when the last chunk of any of its streams came (time.monotonic())
        self.gap = math.inf  # seconds between the last two

    def came(self, now: float) -> None:
        """A chunk of one of its streams came at `now`."""
        self.gap, self.last = now - self.last, now

    def flows(self) -> bool:
        """Whether its last two chunks came less than a pace apart."""
        return self.gap < self.seconds

    def flowing(self, now: float) -> bool:
        """Whether it flows and its last chunk came less than two paces before `now` (streams decoded
        together pause a pace's length or so between their tokens)."""
        return self.flows() and now - self.last < 2 * self.seconds

    def tick(self, now: float) -> float:
        """Its next tick after `now`, on the clock `now` is read from."""
        return (now // self.seconds + 1) * self.seconds


_PACES: dict[float, _Pace] = {}
_PACES_LOCK = threading.Lock()


def _pace(seconds: float) -> _Pace:
    with _PACES_LOCK:
        return _PACES.setdefault(seconds, _Pace(seconds))


def _piece(chunk: dict[str, Any]) -> str | None:
    """The text a chunk adds (a chat delta's content or reasoning, or a completion's text)."""
    choices = chunk.get("choices")
    if not choices:
        return None
    choice = choices[0]
    delta = choice.get("delta")
    piece = (
        (delta.get("content") or delta.get("reasoning_content"))
        if isinstance(delta, dict)
        else choice.get("text")
    )
    return piece if isinstance(piece, str) else None


def _ending(chunk: dict[str, Any], reason: str) -> dict[str, Any]:
    """The last chunk of an answer ended early (the repetition stop: `length`; a format llama.cpp could not
    read: `stop`), with the usage so far."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
    if "delta" in (chunk.get("choices") or [{"delta": {}}])[0]:
        choice["delta"] = {}
    else:
        choice["text"] = ""
    timings = chunk.get("timings") or {}
    cached, prompt = int(timings.get("cache_n", 0)), int(timings.get("prompt_n", 0))
    usage = {
        "prompt_tokens": cached + prompt,
        "completion_tokens": int(timings.get("predicted_n", 0)),
        "total_tokens": cached + prompt + int(timings.get("predicted_n", 0)),
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    frame = {k: v for k, v in chunk.items() if k in ("id", "object", "created", "model")}
    return {**frame, "choices": [choice], "usage": usage}


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _translate(error: Exception) -> ModelportError:
    if isinstance(error, ModelportError):
        return error
    refused = _TEMPLATE_REFUSAL.search(str(error))
    if isinstance(error, ValueError | RuntimeError) and refused:  # the template's own `raise_exception`
        return InvalidRequestError(
            f"The model's chat template refused the conversation: {refused.group(1).strip()}",
            param="messages",
            code="template_error",
        )
    if isinstance(error, ValueError):  # llama.cpp rejects the request itself: grammar, arguments
        return InvalidRequestError(str(error))
    if isinstance(error, TypeError | OverflowError):  # a value llama.cpp's JSON cannot hold (a 100-bit int)
        return InvalidRequestError(f"The request holds a value llama.cpp cannot take: {error}")
    return PredictorError(f"llama.cpp failed: {type(error).__name__}: {error}")


def _translate_body(body: dict[str, Any]) -> ModelportError:
    message = str(body.get("message", "llama.cpp error"))
    if body.get("type") == "exceed_context_size_error":
        return InvalidRequestError(
            f"This model's maximum context length is {body.get('n_ctx')} tokens. However, your messages "
            f"resulted in {body.get('n_prompt_tokens')} tokens. Please reduce the length of the messages.",
            param="messages",
            code="context_length_exceeded",
        )
    if int(body.get("code", 500)) < 500:
        return InvalidRequestError(message)
    if "grammar stack" in message:
        # The grammar asks for text no sequence of this vocabulary's tokens spells (seen with unassigned
        # code points): the request's constraint is at fault, not the server.
        return InvalidRequestError(
            "The model's vocabulary cannot produce the text the output constraint (response_format, "
            f"tools or a guided_* parameter) demands; llama.cpp said: {message}",
            code="unsatisfiable_constraint",
        )
    return PredictorError(f"llama.cpp failed: {message}")
