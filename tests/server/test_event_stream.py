"""The HTTP face's event streams (`server.streaming.EventStream`) on a bare ASGI `send`: frames that come
together go out in one write, in order and whole; a client that reads slowly holds the stream back; a
client whose connection fails ends the stream and the work behind it."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from modelport.server.streaming import GATHERED, EventStream


class Body:
    """Frames as a stream's events make them: `bunches` of frames, each bunch made at once, with a wait
    for the next (as llama.cpp's chunks are handed over); what it made and whether it was closed."""

    def __init__(self, bunches: list[list[bytes]]) -> None:
        self.bunches = bunches
        self.made = 0
        self.closed = False

    async def frames(self) -> AsyncIterator[bytes]:
        try:
            for bunch in self.bunches:
                await asyncio.sleep(0.01)  # the next bunch is being made
                for frame in bunch:
                    self.made += 1
                    yield frame
        finally:
            self.closed = True


async def _never() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError


def run(stream: EventStream, send: Any) -> None:
    asyncio.run(asyncio.wait_for(stream({"type": "http"}, _never, send), 10))


def test_frames_made_together_go_out_in_one_write_in_order() -> None:
    bunches = [[b"data: %d\n\n" % (i * 10 + j) for j in range(n)] for i, n in enumerate([1, 6, 3, 8])]
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    run(EventStream(Body(bunches).frames()), send)

    assert sent[0]["type"] == "http.response.start"
    bodies = [m["body"] for m in sent[1:]]
    assert bodies == [b"".join(bunch) for bunch in bunches] + [b""]
    assert [m["more_body"] for m in sent[1:]] == [True] * len(bunches) + [False]


def test_a_client_that_reads_slowly_holds_the_stream_back() -> None:
    frame = b"data: " + b"x" * 1000 + b"\n\n"
    body = Body([[frame] * 400])  # 400 kB made at once
    made_when_sent: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            made_when_sent.append(body.made)
            await asyncio.sleep(0.02)  # the client reads slowly

    run(EventStream(body.frames()), send)

    assert body.made == 400
    # While a write waits on the client, no more than GATHERED bytes (and the frame past them) are made.
    ahead = [later - earlier for earlier, later in itertools.pairwise(made_when_sent)]
    assert max(ahead) * len(frame) <= GATHERED + 2 * len(frame)
    assert len(made_when_sent) >= 400 * len(frame) // (GATHERED + 2 * len(frame))


def test_a_client_whose_connection_fails_ends_the_stream_and_the_work() -> None:
    body = Body([[b"data: 1\n\n"], [b"data: 2\n\n"], [b"data: 3\n\n"], [b"data: 4\n\n"]])

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            raise OSError("connection reset")

    with pytest.raises(OSError, match="connection reset"):
        run(EventStream(body.frames()), send)
    assert body.closed
    assert body.made < 4


def test_what_a_stream_made_before_it_failed_goes_out_before_the_failure() -> None:
    async def frames() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        await asyncio.sleep(0.01)
        yield b"data: 2\n\n"
        yield b"data: 3\n\n"  # made with the one before it, then the stream fails
        raise RuntimeError("a fault of the server's own")

    sent: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append(message["body"])

    with pytest.raises(RuntimeError, match="own"):
        run(EventStream(frames()), send)
    assert b"".join(sent) == b"data: 1\n\ndata: 2\n\ndata: 3\n\n"
