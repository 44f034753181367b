"""`modelport serve --ray` fits the machine: the default models' replicas ask for what their engines
keep busy, so all six fit a 2-CPU local instance and answer; a configuration that cannot fit stops in
seconds with one line naming the models and the shortfall, instead of waiting for ever."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from modelport.cluster import _check_fit, _cpus
from modelport.settings import ModelConfig, Settings
from tests.support.live import ROOT, LiveServer

pytestmark = pytest.mark.whole_machine  # a local Ray instance of the machine's CPUs


def test_the_default_models_ask_for_two_cpus_at_most() -> None:
    models = Settings().all_models()
    assert sum(_cpus(m) for m in models) <= 2.0
    assert _cpus(ModelConfig(id="x", engine="llamacpp", n_threads=4)) == 4.0  # its threads
    assert _cpus(ModelConfig(id="y", engine="onnx-embedding", num_cpus=1.5)) == 1.5  # as configured


def test_a_configuration_that_cannot_fit_says_what_it_needs() -> None:
    models = [ModelConfig(id="a", engine="onnx-embedding", num_cpus=3, replicas=2)]
    with pytest.raises(ValueError, match=r"need 6 CPUs for 2 replicas \(a 6\), and this Ray instance has 2"):
        _check_fit(models, {"CPU": 2.0})
    with pytest.raises(ValueError, match="GPUs"):
        _check_fit([ModelConfig(id="g", engine="onnx-embedding", num_gpus=1)], {"CPU": 2.0})
    _check_fit(Settings().all_models(), {"CPU": 2.0})


@pytest.mark.slow
def test_an_impossible_configuration_stops_in_seconds(tmp_path: Path) -> None:
    (tmp_path / "models.toml").write_text(
        'defaults = false\n[[models]]\nid = "big"\nengine = "onnx-embedding"\nnum_cpus = 64\n'
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "modelport.cli", "serve", "--ray", "--config", str(tmp_path / "models.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
    )
    assert done.returncode == 2, done.stderr
    assert "need 64 CPUs for 1 replicas (big 64)" in done.stderr
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_the_default_models_on_a_two_cpu_instance_are_ready_and_answer() -> None:
    live = LiveServer("--ray", "--ray-timeout", "240", cwd=ROOT, env={"RAY_USAGE_STATS_ENABLED": "0"})
    try:
        live.wait_ready(300)
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=60)
        chat = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Say hi"}], max_tokens=8
        )
        assert chat.choices[0].message.content
        assert (
            len(client.embeddings.create(model="text-embedding-3-small", input="hi").data[0].embedding) == 384
        )
        spoken = client.audio.speech.create(
            model="tts-1", voice="alloy", input="The quick brown fox.", response_format="wav"
        ).read()
        heard = client.audio.transcriptions.create(model="whisper-1", file=("a.wav", spoken)).text
        assert "fox" in heard.lower()
        assert "modelport: ready in" in live.log.read_text()
    finally:
        live.stop()
