"""Event streams written straight to the ASGI `send`, one pre-encoded frame per event.

Every token of a stream crosses this path, so it holds nothing per event beyond the encoding: no per-event
timeout, task or framework object. Frames that come together (llama.cpp's chunks are handed over in
bunches) go out in one write: the frames are gathered while the stream runs on without waiting, and a
writer sends what has gathered once it waits. Each `send` passes the middlewares and ends in a socket
write (a quarter of the serving thread's busy samples on a streamed answer, by py-spy; a chat answer's 203
frames now go out in 41 writes). Server-sent events get a comment line now and then, which keeps a quiet
connection alive through proxies. A client that leaves is noticed by the `Disconnects` middleware, which
cancels the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from modelport.errors import ModelportError
from modelport.protocol.answers import Events

PING = b": ping\n\n"
PING_SECONDS = 15.0
# Bytes gathered for the writer beyond which the stream waits for it: a client that reads slowly holds its
# stream back rather than the server's memory.
GATHERED = 1 << 16


async def frames(events: Events[Any]) -> AsyncGenerator[bytes, None]:
    """Each event as its kind frames it, then what ends a complete stream (`[DONE]` for chat); an error
    after the headers went out travels as a frame in OpenAI's shape (which the openai SDK raises as
    `APIError`), and nothing follows it."""
    kind = events.kind
    try:
        async for event in events.items:
            yield kind.frame(event)
    except ModelportError as error:
        yield kind.error_frame(error.body())
        return
    finally:
        await events.aclose()  # a client that went away stops its generation here
    if kind.end:
        yield kind.end


class EventStream(StreamingResponse):
    """A `text/event-stream` response over frames (`frames(...)`), with a ping when it has been quiet."""

    def __init__(self, body: AsyncIterator[bytes], ping: float = PING_SECONDS) -> None:
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        super().__init__(body, media_type="text/event-stream", headers=headers)
        self.body_frames = body
        self.ping = ping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        sending = asyncio.Lock()
        gathered: list[bytes] = []
        size = 0
        ready = asyncio.Event()  # frames have gathered, or the stream ended
        room = asyncio.Event()  # the writer took what had gathered
        ended = False
        last = time.monotonic()

        async def write() -> None:
            nonlocal last, size
            try:
                while True:
                    await ready.wait()
                    ready.clear()
                    data, done = b"".join(gathered), ended
                    gathered.clear()
                    size = 0
                    room.set()
                    if data:
                        async with sending:
                            await send({"type": "http.response.body", "body": data, "more_body": True})
                        last = time.monotonic()
                    if done:
                        return
            finally:
                room.set()  # a stream waiting for room goes on to find the writer gone

        async def keep_alive() -> None:
            nonlocal last
            while True:
                await asyncio.sleep(max(0.0, last + self.ping - time.monotonic()))
                if time.monotonic() - last >= self.ping:
                    async with sending:
                        await send({"type": "http.response.body", "body": PING, "more_body": True})
                    last = time.monotonic()

        async def sent_whole() -> None:
            """End the gathering, and wait for the writer to send what had gathered."""
            nonlocal ended
            ended = True
            ready.set()
            await writer

        writer = asyncio.ensure_future(write())
        pinger = asyncio.ensure_future(keep_alive())
        try:
            async for data in self.body_frames:
                if writer.done():  # it failed: the client's connection did
                    writer.result()
                gathered.append(data)
                size += len(data)
                ready.set()
                if size > GATHERED:
                    room.clear()
                    await room.wait()
            await sent_whole()
        except Exception:
            if not writer.done():  # what the stream made before it failed goes out before the failure
                with contextlib.suppress(Exception):
                    await sent_whole()
            raise
        finally:
            pinger.cancel()
            if writer.done() and not writer.cancelled():
                writer.exception()  # raised above, or superseded by what is raised now
            writer.cancel()
            aclose = getattr(self.body_frames, "aclose", None)
            if aclose is not None:
                await aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
