"""llama.cpp's side door (`SideDoor`), without a model: a call under way keeps its server alive. A server
destroyed under a call never ends: its listener's thread waits for the answer of a loop that has stopped,
and the destructor waits for that thread (a model unloaded while its resting turn was being saved hung the
process's close for ever)."""

from __future__ import annotations

import gc
import http.server
import threading
import weakref
from collections.abc import Iterator

import pytest

from modelport.engines.llamacpp.launch import SideDoor


class _Listener:
    """What the door needs of a server (its address), before a listener that answers only when told."""

    def __init__(self, address: str) -> None:
        self.listening_address = address


@pytest.fixture
def held_listener() -> Iterator[tuple[str, threading.Event, threading.Event]]:
    """A loopback HTTP listener whose answers wait for `release`; `arrived` is set as a request arrives."""
    arrived, release = threading.Event(), threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            arrived.set()
            release.wait(30)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *_: object) -> None:
            return

    listener = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.server_address[1]}", arrived, release
    finally:
        release.set()
        listener.shutdown()
        listener.server_close()


def test_a_call_under_way_keeps_its_server_alive(
    held_listener: tuple[str, threading.Event, threading.Event],
) -> None:
    address, arrived, release = held_listener
    server = _Listener(address)
    alive = weakref.ref(server)
    door = SideDoor(server, "key", timeout=30)
    call = threading.Thread(target=door.post, args=("/slots/0?action=save", {"filename": "x.bin"}))
    call.start()
    assert arrived.wait(30)
    del server, door  # what the model's unloading lets go of, while the call is under way
    gc.collect()
    assert alive() is not None
    release.set()
    call.join(30)
    gc.collect()
    assert alive() is None  # and once it has returned, nothing holds it
