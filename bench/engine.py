"""modelport's llama.cpp engine alone, at `start_server`'s defaults (the slots, context, threads and
speculation modelport gives it; not modelport's conversation cache, which is modelport's own layer),
answering over llama.cpp's own HTTP listener: beside modelport's server in a benchmark, it tells what
modelport adds to its engine apart from what the engine's build costs against llama-server's.

    .venv/bin/python -m bench.engine [GGUF]    # prints the listener's URL, then serves until stdin closes
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

KEY = "bench"  # what bench.common.http_client sends


@contextmanager
def engine_server(gguf: Path | None = None) -> Iterator[str]:
    """The engine in a process of its own (two llama.cpp instances in one process skew each other's
    timings); yields its listener's URL."""
    command = [sys.executable, "-m", "bench.engine", *([str(gguf)] if gguf is not None else [])]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None
    assert child.stdout is not None
    try:
        url = child.stdout.readline().strip()
        if not url:
            raise RuntimeError(f"the engine ended before it listened (exit status {child.wait()})")
        yield url
    finally:
        child.stdin.close()
        child.wait(30)


def main() -> None:
    from modelport.engines import llamacpp

    server = llamacpp.start_server(*sys.argv[1:2], api_key=KEY)  # the GGUF given, or the default one
    print(server.listening_address, flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
