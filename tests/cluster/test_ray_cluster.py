"""The one test on a real Ray cluster (a local one the server starts: ~1.4 GB and ~20 s of start-up, so
there is only this one): `modelport serve --ray` with two replicas of the embedding model and one of the
chat model on fractional CPUs; the openai SDK against its ingress; one embedding replica SIGKILLed while
requests keep coming: none is lost, and Ray starts a replacement. Admission holds on the ingress as on any
face: a key of a project limited to one request a minute and to the embedding model is refused the chat
model and its second request."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import openai
import pytest

from tests.server.test_projects import cli, new_key
from tests.support.configs import NO_EOS
from tests.support.live import ROOT, LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.whole_machine]  # a Ray instance


CONFIG = """
defaults = false

[[models]]
id = "chat"
engine = "llamacpp"
n_ctx = 2048
n_parallel = 2
n_threads = 1
num_cpus = 0.5

[[models]]
id = "embed"
engine = "onnx-embedding"
n_threads = 1
replicas = 2
num_cpus = 0.5
"""


def replica_pids(deployment: str) -> list[int]:
    """The processes of a deployment's replicas (Ray titles them `ray::ServeReplica:APP:DEPLOYMENT`)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue
        if f"ServeReplica:{deployment}:{deployment}" in text:
            found.append(int(cmdline.parent.name))
    return sorted(found)


def test_a_real_cluster_serves_streams_and_survives_a_killed_replica(tmp_path: Path) -> None:
    (tmp_path / "models.toml").write_text(CONFIG)
    database = str(tmp_path / "state.db")
    cli("projects", "create", "narrow", "--database", database, "--rpm", "1", "--models", "embed")
    narrow_key = new_key(database, "narrow")
    key = new_key(database, "default")
    live = LiveServer(
        "--config", str(tmp_path / "models.toml"), "--ray", "--database", database,
        cwd=ROOT, env={"RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip
    try:
        live.wait_ready()
        narrow = openai.OpenAI(base_url=f"{live.url}/v1", api_key=narrow_key, max_retries=0, timeout=60)
        with pytest.raises(openai.NotFoundError):
            narrow.chat.completions.create(model="chat", messages=[{"role": "user", "content": "Hi"}])
        assert narrow.embeddings.create(model="embed", input="a cat").data
        with pytest.raises(openai.RateLimitError):
            narrow.embeddings.create(model="embed", input="a dog")
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0, timeout=60)
        # The end of sequence barred: how soon the model stops is its choice (once "*No*", 3 pieces); the
        # server's part is to stream the 20 tokens it was held to, piece by piece, and count them.
        stream = client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "Count to five."}], max_tokens=20,
            logit_bias=NO_EOS, stream=True, stream_options={"include_usage": True},
        )  # fmt: skip
        chunks = list(stream)
        pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert len(pieces) > 3
        ends = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert ends == ["length"]
        assert chunks[-1].usage is not None
        assert chunks[-1].usage.completion_tokens == 20

        first = replica_pids("embed")
        assert len(first) == 2, first
        answered, failed, stop = [], [], threading.Event()

        def keep_asking() -> None:
            while not stop.is_set():
                try:
                    result = client.embeddings.create(model="embed", input=["a cat", "a dog"])
                    answered.append(len(result.data))
                except openai.APIError as error:
                    failed.append(error)

        asker = threading.Thread(target=keep_asking)
        asker.start()
        time.sleep(1)
        os.kill(first[0], signal.SIGKILL)
        deadline = time.monotonic() + 90
        while not (len(now := replica_pids("embed")) == 2 and first[0] not in now):
            assert time.monotonic() < deadline, "Ray did not replace the killed replica in 90 s"
            time.sleep(0.5)
        time.sleep(1)
        stop.set()
        asker.join()
        assert failed == []
        assert len(answered) > 10
        # Bounded, and held to its bound: unbounded, how long the answer ran was the model's choice (a long
        # one on this loaded machine outlasted the client's 60 s); an answer of 16 tokens has text, whichever.
        again = client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "Hi"}], max_tokens=16, logit_bias=NO_EOS
        )
        assert again.choices[0].message.content
    finally:
        live.stop()
    deadline = time.monotonic() + 30
    while replica_pids("embed") or replica_pids("chat"):  # the server took its Ray instance down with it
        assert time.monotonic() < deadline, "Ray's replicas outlived the server"
        time.sleep(0.5)


def test_without_ray_nothing_of_it_is_imported_and_ray_asks_for_the_extra(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['ray'] = None\n"  # as if the extra were not installed
        "import modelport\n"
        "with modelport.OpenAI() as client:\n"
        "    client.embeddings.create(model='text-embedding-3-small', input='hi')\n"
        "from modelport.cli import main\n"
        "sys.exit(main(['serve', '--ray', '--no-defaults', '--port', '1']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 2, done.stderr
    assert "--ray needs Ray Serve: pip install 'modelport[ray]'" in done.stderr
