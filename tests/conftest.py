"""Fixtures: a live `modelport serve` on 127.0.0.1 and an in-process client, on the real default models."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import uvicorn

import modelport
from bench.postgres import Postgres, postgres_binaries

STARTUP_SECONDS = 180
ROOT = Path(__file__).resolve().parents[1]
# Everything the tests' servers and clients store goes to a folder of this run, not the user's data directory.
os.environ.setdefault("MODELPORT_DATA_DIR", tempfile.mkdtemp(prefix="modelport-test-data-"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """An ASGI app served by uvicorn on 127.0.0.1 in a thread of this process; yields its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=free_port(), log_level="warning", timeout_graceful_shutdown=1
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the app did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def wait_healthy(url: str, seconds: float = STARTUP_SECONDS) -> None:
    """Wait until a modelport app's `/health` is 200: its models loaded, its store migrated."""
    deadline = time.monotonic() + seconds
    while httpx.get(f"{url}/health", timeout=5).status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} was not healthy in {seconds} s")
        time.sleep(0.1)


class LiveServer:
    """A `modelport serve` subprocess; its log is kept for failure messages."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, port: int | None = None
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"modelport-test-{self.port}.log"
        self._log_file = self.log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "modelport.cli", "serve", "--port", str(self.port), *args],
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"modelport serve exited early:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"modelport serve was not ready in {STARTUP_SECONDS}s:\n{self.log.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log_file.close()


@contextmanager
def configured_server(
    folder: Path, config: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[LiveServer]:
    """A live server on `config` (a models.toml's text, written into `folder`), ready; stopped after."""
    (folder / "models.toml").write_text(config)
    live = LiveServer("--config", str(folder / "models.toml"), *args, env=env, cwd=ROOT)
    try:
        live.wait_ready()
        yield live
    finally:
        live.stop()


@pytest.fixture(scope="session")
def server() -> Iterator[LiveServer]:
    live = LiveServer()
    try:
        live.wait_ready()
        yield live
    finally:
        live.stop()


@pytest.fixture(scope="session")
def http_client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def inprocess_client() -> Iterator[modelport.OpenAI]:
    client = modelport.OpenAI()
    yield client
    client.close()


@pytest.fixture(params=["http", "in-process"])
def client(request: pytest.FixtureRequest) -> openai.OpenAI:
    """Each test using this runs twice: through the SDK over HTTP, and through the in-process client."""
    name = "http_client" if request.param == "http" else "inprocess_client"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """PostgreSQL 15 from Debian's packages (`.ci/run` installs it); skipped where it is not installed,
    unless MODELPORT_REQUIRE_POSTGRES is set (as CI sets it), where its absence is a failure."""
    binaries = postgres_binaries()
    if binaries is None:
        if os.environ.get("MODELPORT_REQUIRE_POSTGRES"):
            pytest.fail("PostgreSQL is not installed (apt-get install postgresql)")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    server = Postgres(binaries)
    yield server
    server.stop()
