"""A build in the background of `modelport serve`: whether to start one, starting it as a process of its
own (`modelport engine build --idle`), telling it to pause and go on, and stopping it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from modelport.engines.llamacpp.cpu_builds import folder, mode, state

RETRY_AFTER = 24 * 3600  # an automatic build that failed is not tried again before this (seconds)


def should_build() -> bool:
    """Whether `modelport serve` starts a build in the background: the mode is `auto`, this CPU has no
    build, none is under way, one can be made, and none failed in the last day."""
    if mode() != "auto":
        return False
    now = state()
    if now.state == "failed" and now.place is not None:
        return time.time() - (now.place / "failed.json").stat().st_mtime > RETRY_AFTER
    return now.state == "none"


def start_background() -> subprocess.Popen[bytes] | None:
    """`modelport engine build --idle` in a session of its own (stopped with `stop`), its output in the
    build's log; None when there is nothing to build."""
    if not should_build():
        return None
    place = folder()
    assert place is not None
    place.mkdir(parents=True, exist_ok=True)
    with (place / "build.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "modelport.cli", "engine", "build", "--idle"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE,  # `pause` and `go` (see `follow_server`); closed, the build ends
            start_new_session=True,
        )


def order(child: subprocess.Popen[bytes], word: str) -> bool:
    """Tell a background build to `pause` or `go`; False once it has ended."""
    try:
        assert child.stdin is not None
        child.stdin.write(f"{word}\n".encode())
        child.stdin.flush()
    except (BrokenPipeError, ValueError):
        return False
    return True


def stop(child: subprocess.Popen[bytes], wait: float = 10) -> None:
    """End a background build and every compiler it runs (the next one goes on from its objects)."""
    if child.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            child.stdin.close()
    try:
        child.wait(wait)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
