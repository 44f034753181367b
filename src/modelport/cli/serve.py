"""`modelport serve`: the models named on the command line, API keys, and the HTTP server itself."""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from modelport import __version__, hub, machine
from modelport.engine_build import background
from modelport.engines import engine_names
from modelport.engines.llamacpp import cpu_builds
from modelport.engines.recognise import model_id as recognised_id
from modelport.engines.recognise import recognise
from modelport.predictors.registry import ModelRegistry
from modelport.settings import ModelConfig, Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

    from modelport.service import Service

STARTUP_FAILURE = 3  # the exit status of a server that could not start (a port in use), as uvicorn's
SHUTDOWN_SECONDS = 10  # on SIGTERM, streams in flight get this long to finish before they are ended
BUILD_AFTER_IDLE_SECONDS = 1.0  # a paused background build of llama.cpp goes on after this long idle
# An idle kept-alive connection stays open this long: longer than a client keeps one (the openai SDK's
# httpx 5 s, Node's 4-5 s, nginx's upstream and load balancers' 60 s). At uvicorn's 5 s, a client sending its
# next request on a connection 5 s idle met the server's close: "Server disconnected without sending a
# response" (the SDK retries it, unless told not to; a proxy answers 502).
KEEP_ALIVE_SECONDS = 65


def named_models(paths: list[str], named: list[str], mmproj: str | None = None) -> list[ModelConfig]:
    """Models named on the command line: `PATH` (its id from the file name) or `ID=[ENGINE:]PATH`, a path
    or an hf:// reference (pulled now). Each is recognised now, so a wrong one stops the server starting.
    A GGUF pulled from a repository with a projector gets it; `mmproj` is the projector of the one GGUF
    named."""
    found = []
    given: list[tuple[str | None, str]] = [(None, p) for p in paths] + [_id_and_path(n) for n in named]
    for model_id, target in given:
        engine, _, rest = target.partition(":")
        if not rest or engine not in engine_names() or target.startswith(hub.PREFIX):
            engine, rest = "", target
        path = hub.pull(rest) if hub.is_reference(rest) else Path(rest).expanduser()
        engine, options = recognise(path, engine or None)
        if model_id is None:  # a pulled folder is named by its commit: the repository names it better
            from_hub = hub.is_reference(rest) and path.is_dir()
            model_id = hub.parse(rest).repo.split("/")[1] if from_hub else recognised_id(path)
        if engine == "llamacpp" and hub.is_reference(rest):
            projector = hub.projector_beside(Path(options["path"]))
            if projector is not None:
                options["mmproj"] = str(projector)
        found.append(ModelConfig.model_validate({"id": model_id, "engine": engine, **options}))
    if mmproj is not None:
        ggufs = [model for model in found if model.engine == "llamacpp"]
        if len(ggufs) != 1:
            raise ValueError(
                f"--mmproj is the projector of one GGUF model named here; {len(ggufs)} are named"
            )
        ggufs[0] = ModelConfig.model_validate(
            {**ggufs[0].model_dump(), "mmproj": str(Path(mmproj).expanduser())}
        )
        found = [ggufs[0] if model.engine == "llamacpp" else model for model in found]
    return found


def _id_and_path(named: str) -> tuple[str, str]:
    model_id, equals, target = named.partition("=")
    if not equals or not model_id or not target:
        raise ValueError(f"--model {named}: expected ID=PATH or ID=ENGINE:PATH")
    return model_id, target


def api_keys(args: argparse.Namespace) -> list[str]:
    keys = list(getattr(args, "api_key", None) or [])
    keys += [k.strip() for k in os.environ.get("MODELPORT_API_KEY", "").split(",") if k.strip()]
    if getattr(args, "api_key_file", None):
        with open(args.api_key_file) as file:
            keys += [line.strip() for line in file if line.strip() and not line.startswith("#")]
    return keys


def on_ray(settings: Settings, address: str) -> ModelRegistry:
    """The registry of relays to the models deployed on Ray (see `modelport.cluster`)."""
    try:
        import ray.serve  # noqa: F401
    except ImportError as error:
        raise ValueError(f"--ray needs Ray Serve: pip install 'modelport[ray]' ({error})") from None
    from modelport import cluster

    print("modelport: deploying the models on Ray…", file=sys.stderr)
    return cluster.deploy(
        settings, None if address == "local" else address, progress=_loading_bar("deploying on Ray")
    )


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound to `host:port` before anything loads, as uvicorn would bind it; an
    OSError that says which address and why (uvicorn says so only once the models have loaded, or
    deployed on Ray, and after `serve` has said it serves there)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        hint = " (another server there? --port chooses another)" if error.errno == errno.EADDRINUSE else ""
        raise OSError(f"cannot listen on {host}:{port}: {error.strerror}{hint}") from None
    sock.set_inheritable(True)
    return sock


def serve(service: Service, log_level: str, listener: socket.socket, *, on_ray: bool = False) -> int:
    import uvicorn

    from modelport.server.connections import bounded_head
    from modelport.server.quiet_server import QuietServer

    server: uvicorn.Server | None = None
    asked: list[int] = []

    def stop(number: int, frame: FrameType | None) -> None:
        asked.append(number)
        if server is not None:  # uvicorn's own answer to the signal, though it may not listen yet
            server.handle_exit(number, frame)

    builder = None
    with _listening(stop):
        try:
            app = _made(service, log_level, on_ray)
            builder = _build_engine(service) if not on_ray else None
            settings = service.settings
            config = uvicorn.Config(
                app,
                host=settings.host,
                port=settings.port,
                log_level=log_level,
                timeout_graceful_shutdown=SHUTDOWN_SECONDS,
                timeout_keep_alive=KEEP_ALIVE_SECONDS,
                http=bounded_head(settings.limits.read_seconds),
                access_log=False,  # modelport.access logs each request, with its id
            )
            server = QuietServer(config)
            if not asked:
                server.run(sockets=[listener])
        finally:
            listener.close()
            if builder is not None:
                background.stop(builder)
    if on_ray:
        from modelport import cluster

        cluster.shutdown()
    return 0 if asked or (server is not None and server.started) else STARTUP_FAILURE


def _made(service: Service, log_level: str, on_ray: bool) -> FastAPI:
    """The app, with what a start says and sets up before it serves."""
    from modelport.server import create_app

    machine.one_blas_thread()
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for chatty in ("httpx", "httpx2"):  # a line per upstream request, health probe and MCP message
        logging.getLogger(chatty).setLevel(logging.WARNING)
    settings = service.settings
    base = f"http://{settings.host}:{settings.port}"
    page = f", playground {base}/" if settings.ui else ""
    print(f"modelport {__version__}: serving {base}/v1{page}", file=sys.stderr)
    if settings.preload and not on_ray:  # on Ray, the deployments' bar has said it
        service.progress = _loading_bar()
    if not settings.api_keys and not settings.on_loopback():
        print(
            f"modelport: warning: serving on {settings.host} without an API key: anyone who can reach this "
            "port can use the models. Set --api-key or MODELPORT_API_KEY.",
            file=sys.stderr,
        )
    return create_app(settings, service)


@contextlib.contextmanager
def _listening(stop: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """SIGINT and SIGTERM answered by `stop` from the start of serving (uvicorn answers them itself while it
    runs, and hands them back here after): Python's own SIGINT raises KeyboardInterrupt wherever the main
    thread is, and where that was a callback of the garbage collector (the start allocates much) it was
    printed as ignored, and the server went on to serve as if never asked to stop."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may listen
        yield
        return
    previous = {number: signal.signal(number, stop) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _build_engine(service: Service) -> subprocess.Popen[bytes] | None:
    """Start building llama.cpp for this CPU in the background when a llama.cpp model is served on PyPI's
    portable wheel (see `modelport.engine_build`); a thread says when it is done."""
    if not any(spec.source.startswith("engine llamacpp") for spec in service.manager.registry.specs):
        return None
    try:
        child = background.start_background()
    except (OSError, ValueError) as error:
        print(f"modelport: warning: llama.cpp is not being built for this CPU: {error}", file=sys.stderr)
        return None
    if child is None:
        return None
    place = cpu_builds.folder()
    print(
        "modelport: building llama.cpp for this CPU in the background while no request is being answered "
        f"(about 7 min on 2 cores; log: {place and place / 'build.log'}); the next start runs it",
        file=sys.stderr,
    )

    def busy() -> bool:
        return service.loop is None or service.manager.busy()  # not started, loading or answering

    def pause_while_busy() -> None:
        """Compilers beside a generating llama.cpp took 40-55% of its decode speed on 2 cores even at idle
        priority (caches and memory bandwidth are shared): the build runs only while nothing is loaded or
        answered."""
        paused, quiet_since = background.order(child, "pause"), time.monotonic()
        while child.poll() is None:
            now = time.monotonic()
            if busy():
                quiet_since = now
                if not paused:
                    paused = background.order(child, "pause")
            elif paused and now - quiet_since >= BUILD_AFTER_IDLE_SECONDS:
                paused = not background.order(child, "go")
            time.sleep(0.1)
        if child.returncode == 0:
            logging.getLogger("modelport").info(
                "llama.cpp is built for this CPU: the next start of modelport serve runs it"
            )

    threading.Thread(target=pause_while_busy, name="engine-build", daemon=True).start()
    return child


def _loading_bar(what: str = "loading") -> Callable[[str, int, int], None]:
    """A progress bar over the models loading at start-up (on a terminal), then one line when all are."""
    from tqdm import tqdm

    bar = tqdm(desc=what, unit="model", file=sys.stderr, disable=not sys.stderr.isatty(), leave=False)
    started = time.monotonic()
    loaded: list[str] = []

    def progress(model_id: str, done: int, total: int) -> None:
        loaded.append(model_id)
        bar.total = total
        bar.set_postfix_str(model_id)
        bar.update(1)
        if done == total:
            bar.close()
            seconds = time.monotonic() - started
            age = machine.process_age()
            since = f"ready in {age:.1f} s (models {seconds:.1f} s)" if age else f"ready in {seconds:.1f} s"
            print(f"modelport: {since} with {', '.join(loaded)}", file=sys.stderr)

    return progress
