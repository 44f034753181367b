"""Slow clients against `modelport serve`: a request whose head does not arrive whole within `[limits]
read_seconds`, and a body that pauses longer, are answered 408 and their connections closed — connections
held open by a few bytes each (slowloris) would otherwise hold the process's file descriptors for ever —
while every other client is served meanwhile."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live import ROOT, LiveServer

pytestmark = pytest.mark.slow  # a server process, and seconds of waiting for clients that send nothing

READ_SECONDS = 1.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder: Path = tmp_path_factory.mktemp("slow")
    (folder / "models.toml").write_text(f"defaults = false\n[limits]\nread_seconds = {READ_SECONDS}\n")
    live = LiveServer("--config", str(folder / "models.toml"), "--database", "none", cwd=ROOT)
    try:
        live.wait_ready()
        yield live
    finally:
        live.stop()


def opened(live: LiveServer, sent: bytes = b"") -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", live.port), timeout=30)
    if sent:
        connection.sendall(sent)
    return connection


def answer(connection: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed it."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received, time.monotonic()


def test_unfinished_heads_are_a_408_and_closed_while_others_are_served(served: LiveServer) -> None:
    started = time.monotonic()
    idle = [opened(served) for _ in range(20)]  # nothing sent at all
    partial = [
        opened(served, b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n") for _ in range(20)
    ]
    assert httpx.get(f"{served.url}/v1/models", timeout=10).status_code == 200
    for connection in idle + partial:
        received, closed = answer(connection)
        # A partial head is told why; a connection that never spoke (a browser's preconnect) is just closed.
        assert received.startswith(b"HTTP/1.1 408") if connection in partial else received == b"", received
        assert closed - started < READ_SECONDS + 10
        connection.close()
    assert httpx.get(f"{served.url}/v1/models", timeout=10).status_code == 200


def test_a_head_sent_in_pieces_within_the_bound_is_served(served: LiveServer) -> None:
    connection = opened(served, b"GET /v1/models HTTP/1.1\r\n")
    time.sleep(READ_SECONDS / 3)
    connection.sendall(b"Host: localhost\r\nConnection: close\r\n\r\n")
    received, _ = answer(connection)
    assert received.startswith(b"HTTP/1.1 200"), received


def test_a_body_that_stalls_is_a_408_in_openais_shape_and_its_connection_closed(served: LiveServer) -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    connection = opened(served, head + b"Content-Length: 100\r\n\r\n" + b'{"model": "')
    started = time.monotonic()
    received, closed = answer(connection)
    status, _, body = received.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 408"), received
    assert json.loads(body)["error"]["code"] == "request_timeout"
    assert READ_SECONDS - 0.1 <= closed - started < READ_SECONDS + 10


def test_a_head_past_its_bound_is_a_431_and_others_are_not_held_up(served: LiveServer) -> None:
    """uvicorn gathered a head of any size by concatenation: one client sending a header line of hundreds of
    MiB held the event loop, every other request 2-6 s late."""
    from modelport.server.connections import HEAD_BYTES

    connection = opened(served, b"GET /v1/models HTTP/1.1\r\nX-Big: ")
    try:
        for _ in range(64):
            connection.sendall(b"a" * (HEAD_BYTES // 4))
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed on us, as it should be: what it said is read below
    received = b""
    with contextlib.suppress(ConnectionResetError):
        received = connection.recv(200)
    assert received.startswith(b"HTTP/1.1 431"), received
    started = time.monotonic()
    assert httpx.get(f"{served.url}/v1/models", timeout=10).status_code == 200
    assert time.monotonic() - started < 1


def test_bodies_of_any_size_on_a_kept_alive_connection_are_read_whole(served: LiveServer) -> None:
    """The head's bound is the head's: a body many times its size, sent with its head in one piece, then a
    second request on the same connection, are each read whole (a 404: no model, after the body was read)."""
    from modelport.server.connections import HEAD_BYTES

    messages = [{"role": "user", "content": "x" * 2 * HEAD_BYTES}] * 4  # each within [limits] input_chars
    body = json.dumps({"model": "none", "messages": messages})
    with httpx.Client(base_url=served.url, timeout=30) as client:
        for _ in range(2):
            answered = client.post(
                "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
            )
            assert answered.status_code == 404, answered.text


def test_a_kept_alive_connection_outlasts_the_clients_own_idle_expiry(served: LiveServer) -> None:
    # httpx (the openai SDK's) drops an idle connection after 5 s: the server must not close it first, or
    # a request sent on it at that moment is met by the close.
    expiry = httpx.Limits().keepalive_expiry or 5.0
    connection = opened(served, b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n")
    first = connection.recv(65536)
    while b"\r\n\r\n" not in first or len(first.split(b"\r\n\r\n", 1)[1]) < _length(first):
        first += connection.recv(65536)
    assert first.startswith(b"HTTP/1.1 200"), first
    time.sleep(expiry + 1)
    connection.sendall(b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    received, _ = answer(connection)
    assert received.startswith(b"HTTP/1.1 200"), received
    connection.close()


def _length(received: bytes) -> int:
    """The content-length a response's head gives (0 while the head is not whole)."""
    head = received.split(b"\r\n\r\n", 1)[0].lower()
    found = [line for line in head.split(b"\r\n") if line.startswith(b"content-length:")]
    return int(found[0].split(b":", 1)[1]) if found else 0
