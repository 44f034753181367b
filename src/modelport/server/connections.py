"""How long a client may take to send a request's head (its request line and headers). uvicorn waits for
ever: a client that opens connections and sends each a few bytes (slowloris) holds them all, and with them
the process's file descriptors, which its models, its database and its uploads need too. Here a connection
that has not sent a whole head within `[limits] read_seconds` of opening, or of the first byte of its next
request, is answered 408 and closed. (A body that stalls is the `BodyLimit` middleware's to end.)"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class TimedHeadProtocol(HttpToolsProtocol):
    """uvicorn's protocol over httptools (the one it chooses where httptools is installed, as modelport's
    dependencies make sure), with a bound on the time a request's head takes to arrive."""

    read_seconds = 30.0  # set by `timed_head`
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.read_seconds, self._head_late)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_timer is None:  # the next request on a kept-alive connection
            self._head_timer = self.loop.call_later(self.read_seconds, self._head_late)

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.write(_TIMED_OUT)
            self.transport.close()


def timed_head(read_seconds: float) -> type[TimedHeadProtocol]:
    """The protocol class `uvicorn.Config(http=…)` takes, bounding a head to `read_seconds`."""
    return type("TimedHead", (TimedHeadProtocol,), {"read_seconds": read_seconds})
