"""How llama.cpp's chunks reach an async reader (`stream_chunks`), on a handler built here that calls back
as llama.cpp's streaming handlers do, a chunk at a time from its own thread (no model): one by one as
they come, or, for a reader that wants only the whole answer, in bunches, with the end at once and no
chunk held past its bunch's time when the generation pauses."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

from modelport.engines.llamacpp.chunk_stream import stream_chunks
from modelport.predictors.abilities import Bunching

Chunk = dict[str, Any]


def handler(gaps: list[float]) -> Callable[[Chunk, Callable[[Chunk], bool]], None]:
    """A streaming handler that sends a completion chunk after each of `gaps` (seconds), then the end."""

    def handle(request: Chunk, callback: Callable[[Chunk], bool]) -> None:
        for i, gap in enumerate(gaps):
            time.sleep(gap)
            if callback({"object": "text_completion", "choices": [{"index": 0, "text": f"t{i} "}]}):
                return

    return handle


async def received(gaps: list[float], bunch: float | None) -> tuple[list[float], float]:
    """When each chunk reached the reader, and how long after the handler's last chunk the stream ended."""
    stream = stream_chunks(handler(gaps), {"ignore_eos": True})
    assert isinstance(stream, Bunching)
    if bunch is not None:
        stream.bunch(bunch)
    start, times = time.monotonic(), []
    async for _ in stream:
        times.append(time.monotonic() - start)
    return times, time.monotonic() - start - sum(gaps)


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
