"""Unloading: a model idle past its keep_alive, and the least recently used idle one when another needs room
under the memory budget. Against a live server, through the OpenAI SDK and the listing `modelport ps`
reads."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.live import LiveServer, configured_server

pytestmark = pytest.mark.slow  # models loaded and unloaded under a memory budget

# Two models on the same GGUF with small caches (~140 MiB each, estimated); a budget that holds one.
CONFIG = """
defaults = false
preload = false
memory_budget = "260MiB"

[[models]]
id = "left"
engine = "llamacpp"
n_ctx = 2048
n_parallel = 2

[[models]]
id = "right"
engine = "llamacpp"
n_ctx = 2048
n_parallel = 2

[[models]]
id = "brief"
engine = "llamacpp"
n_ctx = 2048
n_parallel = 2
keep_alive = 2

[[models]]
id = "huge"
engine = "llamacpp"
n_ctx = 32768
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with configured_server(tmp_path_factory.mktemp("budget"), CONFIG) as server:
        yield server


@pytest.fixture(scope="module")
def sdk(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=120)


def ask(sdk: openai.OpenAI, model: str) -> str:
    answer = sdk.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Say hi."}], max_tokens=4
    )
    return answer.model


def loaded(live: LiveServer) -> dict[str, dict[str, object]]:
    listing = httpx.get(f"{live.url}/v1/models", params={"loaded": "true"}).json()["data"]
    return {m["id"]: m for m in listing}


def metrics(live: LiveServer) -> str:
    return httpx.get(f"{live.url}/metrics").text


def unloads(live: LiveServer, reason: str) -> float:
    text = metrics(live)
    found = re.findall(rf'modelport_model_unloads_total{{model="[^"]+",reason="{reason}"}} (\S+)', text)
    return sum(float(n) for n in found)


def rss_mib(live: LiveServer) -> float:
    status = Path(f"/proc/{live.process.pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status)[1]) / 1024  # type: ignore[index]


def test_alternating_models_under_a_budget_for_one_evict_and_reload(
    live: LiveServer, sdk: openai.OpenAI
) -> None:
    before = unloads(live, "memory")
    for model in ["left", "right"] * 4:
        assert ask(sdk, model) == model
        assert list(loaded(live)) == [model]  # the other one made room
    assert unloads(live, "memory") - before >= 7
    listed = loaded(live)["right"]
    assert listed["memory_bytes"] > 50 * 2**20  # type: ignore[operator]
    assert listed["keep_alive"] == 300  # loaded on first use: 5 minutes
    assert listed["loaded"] is True
    # Each eviction freed its model's memory: eight loads later the server holds about one model.
    assert rss_mib(live) < 1000
    shown = subprocess.run(
        [sys.executable, "-m", "modelport.cli", "ps", "--url", f"{live.url}/v1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    header, row, engine = shown.stdout.splitlines()
    assert header.split() == ["MODEL", "MEMORY", "IDLE", "UNLOADED", "WHEN", "IDLE", "FOR"]
    assert re.fullmatch(r"right +\d+ MiB +\d+ s +300 s", row)
    # Which llama.cpp build serves: here, in the model's object, and in the metrics.
    assert re.fullmatch(
        r"engine: llama\.cpp of xllamacpp \S+, (built for this CPU|PyPI's portable build) \(.*AVX.*\)", engine
    )
    assert engine.removeprefix("engine: ") == listed["engine_build"]
    build = re.search(
        r'modelport_engine_build_info\{build="(\w+)",engine="llama.cpp",[^}]*\} 1.0', metrics(live)
    )
    assert build is not None
    assert (build[1] == "native") == ("built for this CPU" in engine)


def test_concurrent_requests_during_evictions_are_not_lost(sdk: openai.OpenAI) -> None:
    models = ["left", "right"] * 6
    with ThreadPoolExecutor(len(models)) as pool:
        answered = list(pool.map(lambda m: ask(sdk, m), models))
    assert answered == models


def test_keep_alive_unloads_an_idle_model_and_the_next_request_reloads_it(
    live: LiveServer, sdk: openai.OpenAI
) -> None:
    before = unloads(live, "idle")
    assert ask(sdk, "brief") == "brief"
    assert "brief" in loaded(live)
    deadline = time.monotonic() + 10
    while "brief" in loaded(live):
        assert time.monotonic() < deadline, "not unloaded 10 s after its 2 s keep_alive"
        time.sleep(0.2)
    assert unloads(live, "idle") - before == 1
    assert ask(sdk, "brief") == "brief"
    assert "left" not in loaded(live) or "right" not in loaded(live)


def test_a_model_larger_than_the_budget_is_a_507_that_says_not_to_retry(
    live: LiveServer, sdk: openai.OpenAI
) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        ask(sdk, "huge")
    assert caught.value.status_code == 507
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert "memory budget of 0.25 GiB" in caught.value.message
    assert ask(sdk, "left") == "left"  # nothing else was disturbed
