"""How llama.cpp's chunks reach an async reader (`stream_chunks`), on a handler built here that calls back
as llama.cpp's streaming handlers do, a chunk at a time from its own thread (no model): one by one as
they come, or in bunches (a stream's tokens that come faster than its pace, a whole answer's), with the
end at once, no chunk held past its bunch's time when the generation pauses, and a chunk that comes after
a longer gap at once."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

from modelport.engines.llamacpp.chunk_stream import stream_chunks
from modelport.predictors.abilities import Bunching

Chunk = dict[str, Any]


def handler(
    gaps: list[float], sent: list[float] | None = None
) -> Callable[[Chunk, Callable[[Chunk], bool]], None]:
    """A streaming handler that sends a completion chunk after each of `gaps` (seconds), then the end;
    when each was sent goes to `sent`."""

    def handle(request: Chunk, callback: Callable[[Chunk], bool]) -> None:
        for i, gap in enumerate(gaps):
            time.sleep(gap)
            if sent is not None:
                sent.append(time.monotonic())
            if callback({"object": "text_completion", "choices": [{"index": 0, "text": f"t{i} "}]}):
                return

    return handle


async def received(
    gaps: list[float], bunch: float | None, sent: list[float] | None = None
) -> tuple[list[float], float]:
    """When each chunk reached the reader, and how long after the handler's last chunk the stream ended (and
    when each was sent, into `sent`), in seconds from the stream's start."""
    sent = [] if sent is None else sent
    stream = stream_chunks(handler(gaps, sent), {"ignore_eos": True})
    assert isinstance(stream, Bunching)
    if bunch is not None:
        stream.bunch(bunch)
    start, times = time.monotonic(), []
    async for _ in stream:
        times.append(time.monotonic() - start)
    ended = time.monotonic() - start
    sent[:] = [at - start for at in sent]
    return times, ended - sent[-1]


class CountedLoop(asyncio.SelectorEventLoop):
    """An event loop that counts its wake-ups from other threads (what each costs a serving thread)."""

    woken = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> Any:
        CountedLoop.woken += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def moments(times: list[float]) -> int:
    """How many times the reader was handed chunks: arrivals more than 1 ms apart."""
    return 1 + sum(1 for before, after in itertools.pairwise(times) if after - before > 0.001)


def test_chunks_come_one_by_one_as_they_are_made() -> None:
    times, _ = asyncio.run(received([0.005] * 40, None))
    assert len(times) == 40
    assert moments(times) >= 30  # each woke the reader (a slow machine may join a few)


def test_a_whole_answer_s_chunks_come_in_bunches_and_its_end_at_once() -> None:
    times, late = asyncio.run(received([0.005] * 40, 0.1))
    assert len(times) == 40
    assert moments(times) <= 6  # 200 ms of chunks in bunches of 100 ms, and the end
    assert late < 0.05  # the last ones did not wait out their bunch


def test_a_chunk_waits_no_longer_than_its_bunch_when_the_generation_pauses() -> None:
    times, _ = asyncio.run(received([0.0, 0.6, 0.0], 0.1))
    assert len(times) == 3
    assert times[0] < 0.4  # handed over when its bunch's time was up, not with the chunk after the pause


def test_a_stream_s_chunks_coming_faster_than_its_pace_wake_the_reader_s_loop_once_a_bunch_at_most() -> None:
    """A steady stream paced at 100 ms: its chunks are handed over in bunches by a timer on the reader's own
    loop, so llama.cpp's thread wakes that loop for the first two chunks and the end only, where it woke it
    at every chunk (or twice a bunch)."""
    CountedLoop.woken = 0
    with asyncio.Runner(loop_factory=CountedLoop) as runner:
        times, late = runner.run(received([0.005] * 80, 0.1))
    assert len(times) == 80
    assert moments(times) <= 9  # 400 ms of chunks in bunches of 100 ms, the first two and the end
    assert late < 0.05  # the end at once
    assert CountedLoop.woken <= 5


def test_a_chunk_that_comes_after_a_longer_gap_than_the_pace_is_handed_over_at_once() -> None:
    """A model slower than the pace (its tokens 300 ms apart, paced at 250) has each token sent as it comes,
    not held for the pace's time."""
    sent: list[float] = []
    times, _ = asyncio.run(received([0.3] * 4, 0.25, sent))
    assert len(times) == 4
    delays = sorted(at - made for at, made in zip(times, sent, strict=True))
    assert delays[len(delays) // 2] < 0.1


def test_streams_each_slower_than_their_pace_but_together_faster_are_handed_over_together() -> None:
    """Six streams at one pace (100 ms), each a chunk every 150 ms (so each chunk comes more than a pace after
    its stream's last) but together a chunk every 25 ms: past each stream's first chunk, their chunks are
    handed over on the pace's ticks, every stream's at one wake-up, and llama.cpp's threads wake the loop for
    the first chunks and the ends only, where each chunk woke it (48 and more); none waits past a tick."""
    CountedLoop.woken = 0
    sent: list[list[float]] = [[] for _ in range(6)]

    async def together() -> list[tuple[list[float], float]]:
        return await asyncio.gather(*(received([0.025 * i] + [0.15] * 7, 0.1, sent[i]) for i in range(6)))

    with asyncio.Runner(loop_factory=CountedLoop) as runner:
        results = runner.run(together())
    assert all(len(times) == 8 for times, _ in results)
    assert CountedLoop.woken <= 20
    delays = sorted(
        at - made
        for (times, _), made_at in zip(results, sent, strict=True)
        for at, made in zip(times, made_at, strict=True)
    )
    assert delays[len(delays) // 2] < 0.1
