"""How long a client may take to send a request's head (its request line and headers), and how large the
head may be. uvicorn waits for ever: a client that opens connections and sends each a few bytes (slowloris)
holds them all, and with them the process's file descriptors, which its models, its database and its uploads
need too. Here a connection that has not sent a whole head within `[limits] read_seconds` of opening, or of
the first byte of its next request, is answered 408 and closed (closed only, if it never sent a byte: a
browser's preconnected socket). And uvicorn gathers a head of any size, by concatenation: one client
sending a header line of a few hundred MiB held the event loop, every other request 2-6 s late; a head past
`HEAD_BYTES` is answered 431 and closed. (A body that stalls is the `BodyLimit` middleware's to end.)"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
# A request's line and headers, at most (nginx's default is 32 KiB, Node's 16): an SDK's are under 2 KiB.
HEAD_BYTES = 64 * 1024


class BoundedHeadProtocol(HttpToolsProtocol):
    """uvicorn's protocol over httptools (the one it chooses where httptools is installed, as modelport's
    dependencies make sure), with bounds on the time a request's head takes to arrive and on its size."""

    read_seconds = 30.0  # set by `bounded_head`
    _head_timer: asyncio.TimerHandle | None = None
    # Bytes of the head being read (while `_head_timer` runs), less the piece that began a kept-alive
    # connection's next request (part of it may have been the last request's body).
    _head_bytes = 0
    _spoke = False  # whether the client has sent anything yet

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.read_seconds, self._head_late)

    def data_received(self, data: bytes) -> None:
        self._spoke = True
        reading = self._head_timer
        super().data_received(data)
        if reading is not None and self._head_timer is reading:  # all of `data` was of one unfinished head
            self._head_bytes += len(data)
            if self._head_bytes > HEAD_BYTES and not self.transport.is_closing():
                self._stop_head_timer()
                self.transport.write(_TOO_LARGE)
                self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_timer is None:  # the next request on a kept-alive connection
            self._head_timer = self.loop.call_later(self.read_seconds, self._head_late)
            self._head_bytes = 0

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
            if self._spoke:  # a connection that never sent a byte (a browser's preconnect) is just closed
                self.transport.write(_TIMED_OUT)
            self.transport.close()


def bounded_head(read_seconds: float) -> type[BoundedHeadProtocol]:
    """The protocol class `uvicorn.Config(http=…)` takes: a head within `read_seconds` and `HEAD_BYTES`."""
    return type("BoundedHead", (BoundedHeadProtocol,), {"read_seconds": read_seconds})
