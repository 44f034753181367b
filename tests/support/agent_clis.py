"""What the agent CLI tests (and those of other npm packages) share: packages installed from npm, or from
PyPI into a virtual environment of their own, once into a cache folder (a skip saying why where they cannot
be), and a relay between the CLI and the server that passes each request on, as the test shaped it, and its
answer back as it streams."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tests.support.live import serve_app


def installed(package: str, version: str, command: str, cache: Path) -> Path:
    """The command `command` of npm's `package@version`, installed into `cache` once."""
    binary = cache / "node_modules" / ".bin" / command
    if not binary.exists():
        node_packages({package: version}, cache)
    if not binary.exists():
        pytest.skip(f"{package} installed from npm without its `{command}` command")
    return binary


def python_installed(package: str, version: str, command: str, cache: Path) -> Path:
    """The command `command` of PyPI's `package==version`, in a virtual environment of its own under `cache`
    (a CLI that pins its own dependencies, as aider pins openai 2, cannot share ours)."""
    return python_environment(f"{package}-{version}", [f"{package}=={version}"], cache) / "bin" / command


def python_environment(name: str, requirements: list[str], cache: Path) -> Path:
    """A virtual environment `cache/name` with PyPI's `requirements` installed into it once; a mark written
    last says the install is whole (a virtual environment cannot be moved into place: its scripts name its
    folder)."""
    venv = cache / name
    whole = venv / "installed"
    if whole.exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    steps = (
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "pip"), "install", "--quiet", "--only-binary=:all:", *requirements],
    )
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            pytest.skip(f"{' '.join(requirements)} did not install from PyPI: {done.stderr[-500:]}")
    whole.touch()
    return venv


def node_packages(packages: dict[str, str], cache: Path) -> Path:
    """npm's `packages` (name: version) installed into `cache` once (a skip saying why where they cannot
    be); `cache`, where a script that imports them is put for Node.js to find them."""
    if all((cache / "node_modules" / name / "package.json").exists() for name in packages):
        return cache
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not on this machine: {', '.join(packages)} come from npm's registry")
    cache.mkdir(parents=True, exist_ok=True)
    wanted = [f"{name}@{version}" for name, version in packages.items()]
    done = subprocess.run(
        [npm, "install", "--prefix", str(cache), *wanted], capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        pytest.skip(f"{', '.join(packages)} did not install from npm: {done.stderr[-500:]}")
    return cache


class Relay:
    """Between a CLI and the server: each JSON request POSTed to a path ending in `endpoint` kept as the CLI
    sent it (`sent`) and passed on as `shape` makes it (the turn's shape, which the test decides); every
    other request passed on as given; each answer passed back as it streams, its status kept."""

    def __init__(
        self, upstream: str, endpoint: str, shape: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        self.upstream, self.endpoint, self.shape = upstream, endpoint, shape
        self.sent: list[dict[str, Any]] = []  # what the CLI sent, as it sent it
        self.statuses: list[int] = []
        self.client = httpx.AsyncClient(timeout=900)

    async def handle(self, request: Request) -> StreamingResponse:
        body = await request.body()
        if request.url.path.endswith(self.endpoint) and request.method == "POST":
            given = json.loads(body)
            self.sent.append(given)
            body = json.dumps(self.shape(given)).encode()
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
        onward = self.client.build_request(
            request.method, self.upstream + request.url.path, params=request.query_params, content=body,
            headers=headers,
        )  # fmt: skip
        answer = await self.client.send(onward, stream=True)
        self.statuses.append(answer.status_code)
        passed = {k: v for k, v in answer.headers.items() if k not in ("content-length", "transfer-encoding")}
        return StreamingResponse(answer.aiter_raw(), status_code=answer.status_code, headers=passed)


@contextmanager
def relaying(
    upstream: str, endpoint: str, shape: Callable[[dict[str, Any]], dict[str, Any]]
) -> Iterator[tuple[str, Relay]]:
    """A `Relay` to `upstream` served on 127.0.0.1 while the block runs: its base URL, and it."""
    relay = Relay(upstream, endpoint, shape)
    routes = [Route("/{path:path}", relay.handle, methods=["GET", "POST", "DELETE", "HEAD"])]
    with serve_app(Starlette(routes=routes)) as url:
        yield url, relay
