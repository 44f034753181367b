"""SIGTERM lets streams in flight finish or ends them cleanly, and the server exits within its bound."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from modelport.cli.serve import SHUTDOWN_SECONDS
from tests.support.live import LiveServer
from tests.support.machine_load import slack

pytestmark = pytest.mark.slow  # a process stopped mid-stream

CONFIG = (
    'defaults = false\n[[models]]\nid = "chat"\nengine = "llamacpp"\nn_parallel = 2\nn_ctx_per_slot = 2048\n'
)


def test_sigterm_ends_streams_and_exits_within_the_bound(tmp_path: Path) -> None:
    (tmp_path / "models.toml").write_text(CONFIG)
    live = LiveServer("--config", str(tmp_path / "models.toml"), cwd=Path(__file__).parents[2])
    live.wait_ready()
    body = {
        "model": "chat",
        "prompt": "Count:",
        "max_tokens": 1500,
        "logit_bias": {"0": -100},
        "stream": True,
    }
    events: list[str] = []
    ended = threading.Event()

    def read() -> None:
        try:
            with httpx.stream("POST", f"{live.url}/v1/completions", json=body, timeout=60) as response:
                for line in response.iter_lines():
                    events.append(line)
        except httpx.HTTPError:
            pass  # the server closed the connection: an ended stream
        ended.set()

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 60
    while not events:
        assert time.monotonic() < deadline, "the stream did not begin"
        time.sleep(0.05)
    start = time.monotonic()
    live.process.send_signal(signal.SIGTERM)
    live.process.wait(timeout=SHUTDOWN_SECONDS + 15)
    assert time.monotonic() - start < SHUTDOWN_SECONDS + 10 * slack()
    assert ended.wait(timeout=5), "the client's stream did not end with the server"
    live.stop()
