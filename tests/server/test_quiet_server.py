"""The server's main loop looks once a second, not ten times, yet stops as soon as it is asked and keeps its
`Date` header current."""

from __future__ import annotations

import email.utils
import threading
import time
from typing import Any

import httpx
import uvicorn

from modelport.server.quiet_server import QuietServer
from tests.support.live import free_port
from tests.support.machine_load import slack


async def _hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


class _Counted(QuietServer):
    """Counts its main loop's looks."""

    looks = 0

    async def on_tick(self, counter: int) -> bool:
        self.looks += 1
        return await super().on_tick(counter)


def _started(server: uvicorn.Server) -> threading.Thread:
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30 * slack()
    while not server.started:
        assert thread.is_alive(), "the server failed to start"
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.005)
    return thread


def _server() -> _Counted:
    return _Counted(uvicorn.Config(_hello, host="127.0.0.1", port=free_port(), log_level="warning"))


def test_an_idle_server_looks_once_a_second_and_stops_when_asked() -> None:
    server = _server()
    thread = _started(server)
    try:
        time.sleep(1.5)
        # Its first look, then one as each second turns; uvicorn's own loop looks every 0.1 s (15 here). A
        # loaded machine makes fewer, not more.
        assert server.looks <= 3
    finally:
        asked = time.monotonic()
        server.stop()  # from another thread than the server's
        thread.join(10 * slack())
    assert not thread.is_alive()
    assert time.monotonic() - asked < 0.5 * slack()  # not at the next whole second


def test_the_date_header_turns_with_the_second() -> None:
    server = _server()
    thread = _started(server)
    try:
        url = f"http://127.0.0.1:{server.config.port}/"
        with httpx.Client() as client:
            first = client.get(url).headers["date"]
            deadline = time.monotonic() + 5 * slack()
            while (date := client.get(url).headers["date"]) == first:
                assert time.monotonic() < deadline, "the Date header was not renewed"
                time.sleep(0.05)
        said = email.utils.parsedate_to_datetime(date).timestamp()
        assert abs(said - time.time()) < 2 * slack()
    finally:
        server.stop()
        thread.join(10 * slack())
