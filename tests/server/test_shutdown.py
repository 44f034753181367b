"""SIGTERM lets streams in flight finish or ends them cleanly, and the server exits within its bound; a SIGINT
during the start ends it too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from modelport.cli.serve import SHUTDOWN_SECONDS
from modelport.engines.llamacpp.launch import default_gguf
from tests.support.live import LiveServer, free_port
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


@pytest.mark.parametrize("after", [0.0, 0.05, 0.15, 0.4])
def test_ctrl_c_at_any_moment_of_the_start_ends_the_server(tmp_path: Path, after: float) -> None:
    """A SIGINT that comes while the server is being made (its app, uvicorn's start): Python's own
    KeyboardInterrupt, raised in a callback of the garbage collector there, was printed as ignored and the
    server went on to serve."""
    gguf = default_gguf()
    server = subprocess.Popen(
        [sys.executable, "-m", "modelport.cli", "serve", "--lazy", "--no-defaults", "--port",
         str(free_port()), "--database", str(tmp_path / "state.db"), "--model", f"chat=llamacpp:{gguf}"],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "MODELPORT_LLAMACPP_BUILD": "cached"},
    )  # fmt: skip
    assert server.stderr is not None
    assert "serving" in server.stderr.readline()  # its app is being made now
    time.sleep(after)
    server.send_signal(signal.SIGINT)
    try:
        assert server.wait(10 * slack()) == 0
    finally:
        server.kill()
