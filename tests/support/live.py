"""Servers a test or a benchmark starts and stops: a `modelport serve` process (or any server command), or an
ASGI app served by uvicorn in a thread of this process. Every wait has a deadline, and a server that does
not come up says why, with its log."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.support.machine_load import slack

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 180.0
STOP_SECONDS = 20.0


def free_port() -> int:
    """A port nothing listens on now, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> int | None:
    """The status `url` answers with, or None when nothing answers."""
    try:
        return httpx.get(url, timeout=5).status_code
    except httpx.HTTPError:
        return None


class Served:
    """A server process: started at once, its output kept in a log; ready when `ready_path` answers 200."""

    def __init__(
        self,
        command: Sequence[str],
        port: int,
        ready_path: str = "/health",
        *,
        what: str = "the server",
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.ready_path = ready_path
        self.what = what
        self.log = Path(tempfile.mkstemp(prefix=f"modelport-{port}-", suffix=".log")[1])
        self._log_file = self.log.open("w")
        self.process = subprocess.Popen(
            list(command),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, seconds: float = STARTUP_SECONDS) -> None:
        """Return once it answers 200, within `seconds`; raise with its log if it exits or is late."""
        deadline = time.monotonic() + seconds
        while answers(self.url + self.ready_path) != 200:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.what} exited at start-up:\n{self.log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.what} was not ready in {seconds:.0f} s:\n{self.log.read_text()}")
            time.sleep(0.2)

    def stop(self, seconds: float = STOP_SECONDS) -> None:
        """SIGTERM, then SIGKILL past `seconds`; the log is removed, after the end of it is printed if the
        server had exited by itself (pytest shows it beside a test that fails)."""
        exited = self.process.poll()
        self.process.terminate()
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=seconds)
        self._log_file.close()
        if exited is not None:
            print(f"{self.what} had exited ({exited}):\n{self.log.read_text()[-5000:]}", file=sys.stderr)
        self.log.unlink(missing_ok=True)


class LiveServer(Served):
    """`modelport serve` with these arguments, in a process of its own (on `port`, or a free one)."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, port: int | None = None
    ) -> None:
        port = port or free_port()
        command = [sys.executable, "-m", "modelport.cli", "serve", "--port", str(port), *args]
        super().__init__(command, port, what="modelport serve", env=env, cwd=cwd)


@contextmanager
def serving(
    command: Sequence[str],
    ready_path: str,
    port: int,
    what: str,
    *,
    env: dict[str, str] | None = None,
    seconds: float = 300,
) -> Iterator[tuple[str, int]]:
    """Run a server command until the block ends; yields its base URL and process id once `ready_path`
    answers 200, within `seconds`."""
    served = Served(command, port, ready_path, what=what, env=env)
    try:
        served.wait_ready(seconds)
        yield served.url, served.pid
    finally:
        served.stop(30)


@contextmanager
def configured_server(
    folder: Path, config: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[LiveServer]:
    """`modelport serve` on `config` (a models.toml's text, written into `folder`), ready; stopped after."""
    (folder / "models.toml").write_text(config)
    live = LiveServer("--config", str(folder / "models.toml"), *args, env=env, cwd=ROOT)
    try:
        live.wait_ready()
        yield live
    finally:
        live.stop()


def tokens_counted(url: str, model: str, kind: str) -> float:
    """What a server's `modelport_tokens_total` counts for `model` and `kind` (prompt, completion) so far."""
    return counted(url, "modelport_tokens_total", model=model, kind=kind)


def _samples(url: str, name: str) -> Iterator[Sample]:
    """The samples of a server's metric `name`, from one read of its metrics."""
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=30).text):
        yield from (sample for sample in family.samples if sample.name == name)


def counted(url: str, name: str, **labels: str) -> float:
    """A server's counter `name` so far, summed over the samples that carry `labels` (among others)."""
    return sum((s.value for s in _samples(url, name) if labels.items() <= s.labels.items()), 0.0)


def emptied_past(url: str, count: float) -> None:
    """Wait until a server's conversation cache has emptied more slots than `count` (its erases counter)."""
    deadline = time.monotonic() + 30 * slack()
    while counted(url, "modelport_conversation_erases_total") <= count:
        assert time.monotonic() < deadline, "the slots left full were not emptied once nothing ran"
        time.sleep(0.05)


def counted_by(url: str, name: str, label: str) -> dict[str, float]:
    """A server's counter `name` so far, summed by the value of its `label`, in one read of its metrics."""
    totals: dict[str, float] = {}
    for sample in _samples(url, name):
        if label in sample.labels:
            totals[sample.labels[label]] = totals.get(sample.labels[label], 0.0) + sample.value
    return totals


@contextmanager
def health_probed(url: str, every: float = 0.02) -> Iterator[list[float]]:
    """`/health` asked every `every` seconds from a thread of its own while the block runs: the seconds each
    answer took, so far (a flood's cost to everyone else)."""
    waits: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            while not stop.is_set():
                start = time.perf_counter()
                client.get("/health")
                waits.append(time.perf_counter() - start)
                stop.wait(every)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        yield waits
    finally:
        stop.set()
        thread.join(STOP_SECONDS)


@contextmanager
def serve_app(app: Any, seconds: float = 30) -> Iterator[str]:
    """An ASGI app served by uvicorn on 127.0.0.1 in a thread of this process; yields its base URL once it
    listens (its lifespan has started), within `seconds`."""
    from modelport.cli.serve import KEEP_ALIVE_SECONDS
    from modelport.server.quiet_server import QuietServer

    server = QuietServer(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=free_port(),
            log_level="warning",
            timeout_graceful_shutdown=1,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,  # as `modelport serve` keeps a connection
        )
    )
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + seconds
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.stop()
            raise RuntimeError("the app did not start")
        time.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.stop()
        thread.join(timeout=STOP_SECONDS)


def wait_healthy(url: str, seconds: float = STARTUP_SECONDS) -> None:
    """Wait until a modelport app's `/health` is 200 (its models loaded, its store migrated)."""
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=5) as client:  # one client: each makes a TLS context, 50 ms
        while True:
            try:  # what it says of itself: still loading, a model that failed, the store
                answer = client.get(f"{url}/health")
                if answer.status_code == 200:
                    return
                said = f"{answer.status_code}: {answer.text[:2000]}"
            except httpx.HTTPError as error:
                said = repr(error)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} was not healthy in {seconds:.0f} s (last answer: {said})")
            time.sleep(0.02)
