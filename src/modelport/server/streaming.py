"""Server-sent events written straight to the ASGI `send`, one pre-encoded frame per event.

Every token of a stream crosses this path, so it holds nothing per event beyond the encoding and the write:
no per-event timeout, task or framework object. A comment line keeps a quiet connection alive through
proxies. A client that leaves is noticed by the `Disconnects` middleware, which cancels the work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import orjson
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from modelport.errors import ModelportError

DONE = b"data: [DONE]\n\n"
PING = b": ping\n\n"
PING_SECONDS = 15.0


def frame(event: Any, named: bool = False) -> bytes:
    """One `data:` frame of a JSON-able event; `named`: after an `event:` line of its `type` (as the
    Responses API sends its events)."""
    data = b"data: " + orjson.dumps(event) + b"\n\n"
    return b"event: " + str(event["type"]).encode() + b"\n" + data if named else data


async def frames(
    events: AsyncGenerator[Any, None], *, done: bool, named: bool = False
) -> AsyncGenerator[bytes, None]:
    """Each event as a frame, then `[DONE]` if asked; an error after the headers went out travels as a data
    frame in OpenAI's shape (which the openai SDK raises as `APIError`), and no `[DONE]` follows it."""
    try:
        async for event in events:
            yield frame(event, named)
    except ModelportError as error:
        yield frame(error.body())
        return
    finally:
        await events.aclose()  # a client that went away stops its generation here
    if done:
        yield DONE


class EventStream(StreamingResponse):
    """A `text/event-stream` response over frames (`frames(...)`)."""

    def __init__(self, body: AsyncIterator[bytes], ping: float = PING_SECONDS) -> None:
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        super().__init__(body, media_type="text/event-stream", headers=headers)
        self.body_frames = body
        self.ping = ping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        sending = asyncio.Lock()
        last = time.monotonic()

        async def keep_alive() -> None:
            nonlocal last
            while True:
                await asyncio.sleep(max(0.0, last + self.ping - time.monotonic()))
                if time.monotonic() - last >= self.ping:
                    async with sending:
                        await send({"type": "http.response.body", "body": PING, "more_body": True})
                    last = time.monotonic()

        pinger = asyncio.ensure_future(keep_alive())
        try:
            async for data in self.body_frames:
                async with sending:
                    await send({"type": "http.response.body", "body": data, "more_body": True})
                last = time.monotonic()
        finally:
            pinger.cancel()
            aclose = getattr(self.body_frames, "aclose", None)
            if aclose is not None:
                await aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
