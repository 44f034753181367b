"""Benchmark: the first start on a machine whose CPU has no llama.cpp build yet — how soon `modelport serve`
answers while it builds one in the background, and what single-stream decode is meanwhile, against the same
server with no build under way (`MODELPORT_LLAMACPP_BUILD=portable`), in turn.

    .venv/bin/python -m bench.first_start [--rounds 2]

Each round starts the default models twice on an empty engine folder (a temporary one: the user's build is
not touched), once building and once not; each start is timed to /health and to its first answer, then
sends 8 greedy 128-token streams one after another. The build is ended with each server.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from unittest import mock

import httpx
import openai

from bench.common import machine, table
from modelport.engines.llamacpp import cpu_builds
from tests.support.live import free_port


def start(mode: str, engines: str) -> list[object]:
    """One start: seconds to ready and to the first answer, the decode rates' median, build processes."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    began = time.monotonic()
    variables = {cpu_builds.VARIABLE: mode, "MODELPORT_ENGINE_DIR": engines}
    with mock.patch.dict("os.environ", variables):
        server = subprocess.Popen(
            [sys.executable, "-m", "modelport.cli", "serve", "--port", str(port), "--log-level", "warning"],
            stderr=subprocess.DEVNULL,
        )
    try:
        while True:
            try:
                if httpx.get(f"{url}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        ready = time.monotonic() - began
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        hello = [{"role": "user", "content": "Hi!"}]
        client.chat.completions.create(model="gpt-4o-mini", messages=hello, max_tokens=16)  # type: ignore[arg-type]
        first = time.monotonic() - began
        rates = []
        for i in range(8):
            times = []
            stream = client.completions.create(
                model="gpt-3.5-turbo-instruct", prompt=f"{i}. Once upon a time", max_tokens=128,
                temperature=0, stream=True, logit_bias={"2": -100},
            )  # fmt: skip
            for chunk in stream:
                if chunk.choices and chunk.choices[0].text:
                    times.append(time.perf_counter())
            rates.append((len(times) - 1) / (times[-1] - times[0]))
        with mock.patch.dict("os.environ", variables):
            building = cpu_builds.state().state == "building"
    finally:
        server.terminate()
        server.wait(30)
    return [mode, ready, first, statistics.median(rates), "yes" if building else "no"]


def main(rounds: int) -> None:
    print(f"# The first start, with llama.cpp building beside it and without\n\n{machine()}")
    rows = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="modelport-engine-") as engines:
            for mode in ("auto", "portable"):
                rows.append(start(mode, engines))
                print(f"  {rows[-1]}", flush=True)
    headers = ["mode", "ready s", "first answer s", "decode tok/s (median of 8)", "build under way"]
    print(table("The first start (modelport serve, the default models)", headers, rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    main(parser.parse_args().rounds)
