"""A Ray cluster of two nodes on this machine (`ray start --head`, then a second `ray start --address`):
`modelport serve --ray ADDRESS` joins it, its replicas are placed on both nodes, and when the second node's
raylet is killed its replica is rescheduled on the first while requests keep coming — none fails (those no
replica had begun are sent again) — and the node can come back."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import openai
import pytest

from tests.support.live import ROOT, LiveServer, free_port

pytestmark = [pytest.mark.slow, pytest.mark.whole_machine]  # two Ray nodes and three replicas


CONFIG = """
defaults = false

[[models]]
id = "chat"
engine = "llamacpp"
n_ctx = 2048
n_parallel = 2
n_threads = 1
num_cpus = 1

[[models]]
id = "embed"
engine = "onnx-embedding"
n_threads = 1
replicas = 2
num_cpus = 1
"""


def ray(command: list[str], env: dict[str, str]) -> None:
    """Run `ray ...`; when it fails, the failure says what Ray printed."""
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{' '.join(command[1:])}: {done.returncode}\n{done.stdout}{done.stderr}"


def raylets() -> dict[int, bool]:
    """Raylet process → whether it is the head node's."""
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "raylet/raylet" in text.split("\0")[0]:
            found[int(cmdline.parent.name)] = "__internal_head__" in text
    return found


def replica_nodes(deployment: str) -> list[int]:
    """The raylet each replica of `deployment` runs under (its parent process)."""
    nodes = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if f"ServeReplica:{deployment}:{deployment}" in cmdline.read_bytes().decode(errors="replace"):
                nodes.append(int((cmdline.parent / "stat").read_text().split()[3]))
        except OSError:
            continue
    return sorted(nodes)


def test_a_killed_node_s_replicas_move_and_no_request_fails(tmp_path: Path) -> None:
    command = [str(Path(sys.executable).parent / "ray")]  # the venv's `ray`, beside its python
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",  # a node joining needs the cluster's token
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        # The head checks its nodes every half second, not every 3 (a check still waits 10 s for an answer,
        # so a busy node is not taken for dead): the dead node is found in ~2 s rather than ~13.
        "RAY_health_check_period_ms": "500",
        "RAY_health_check_failure_threshold": "3",
    }
    port = free_port()
    join = [*command, "start", "--address", f"127.0.0.1:{port}", "--num-cpus", "2"]
    head = [*command, "start", "--head", "--port", str(port), "--include-dashboard=false"]
    ray([*head, "--num-cpus", "3"], env)
    live = None
    try:
        ray(join, env)
        (tmp_path / "models.toml").write_text(CONFIG)
        live = LiveServer(
            "--config", str(tmp_path / "models.toml"), "--ray", f"127.0.0.1:{port}", cwd=ROOT, env=env
        )
        live.wait_ready(240)
        nodes = raylets()
        worker = next(pid for pid, head in nodes.items() if not head)
        placed = replica_nodes("embed") + replica_nodes("chat")
        assert set(placed) == set(nodes)  # the replicas are spread over both nodes
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=60)
        answered: list[float] = []  # when each request was answered
        failed: list[openai.APIError] = []
        stop = threading.Event()

        def keep_asking() -> None:
            while not stop.is_set():
                try:
                    client.embeddings.create(model="embed", input=["a cat"])
                    answered.append(time.monotonic())
                except openai.APIError as error:
                    failed.append(error)

        def until(condition: Callable[[], bool], seconds: float, what: str) -> None:
            deadline = time.monotonic() + seconds
            while not condition():
                assert time.monotonic() < deadline, f"{what} in {seconds:.0f} s"
                time.sleep(0.2)

        asker = threading.Thread(target=keep_asking)
        asker.start()
        until(lambda: len(answered) >= 3, 60, "fewer than 3 requests answered before the kill")
        os.kill(worker, signal.SIGKILL)
        killed = time.monotonic()
        # Moved: two replicas again, each under a live raylet (the dead node's replica outlives its raylet a
        # while, an orphan, which is no replica moved).
        until(
            lambda: len(now := replica_nodes("embed")) == 2 and set(now) <= set(raylets()),
            120,
            "Ray did not move the dead node's replica",
        )
        moved = time.monotonic()
        # Requests go on being answered once the replica has moved (how many in a second depends on the
        # machine's load, so the test waits for a few rather than counting).
        until(
            lambda: sum(t > moved for t in answered) >= 3, 60, "fewer than 3 requests answered after the move"
        )
        stop.set()
        asker.join()
        after = sum(t > killed for t in answered)
        print(f"answered {len(answered)} ({after} after the kill), failed {len(failed)}")
        assert failed == []
        stream = client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "Hi"}], max_tokens=5, stream=True
        )
        assert any(c.choices and c.choices[0].delta.content for c in stream)
        ray(join, env)  # the node comes back
        assert len(raylets()) == 2
        assert client.embeddings.create(model="embed", input=["back"]).data
    finally:
        if live is not None:
            live.stop()
        subprocess.run([*command, "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_a_deployment_that_cannot_be_scheduled_stops_the_start_with_rays_reason(tmp_path: Path) -> None:
    """On a joined cluster (which might grow, so no fit check up front), a replica that cannot be placed
    is reported as Ray Serve says why, and the start ends after `--ray-timeout`."""
    command = [str(Path(sys.executable).parent / "ray")]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    env["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    # Ray Serve says why a replica is not placed after 2 s rather than its 30.
    env["RAY_SERVE_SLOW_STARTUP_WARNING_S"] = env["RAY_SERVE_SLOW_STARTUP_WARNING_PERIOD_S"] = "2"
    port = free_port()
    head = [*command, "start", "--head", "--port", str(port), "--include-dashboard=false"]
    ray([*head, "--num-cpus", "1"], env)
    try:
        (tmp_path / "models.toml").write_text(
            'defaults = false\n[[models]]\nid = "wide"\nengine = "onnx-embedding"\nnum_cpus = 2\n'
        )
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "modelport.cli", "serve", "--config", str(tmp_path / "models.toml"),
             "--ray", f"127.0.0.1:{port}", "--ray-timeout", "15", "--port", str(free_port())],
            env=env, capture_output=True, text=True, timeout=240, cwd=ROOT,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "not ready after 15 s" in done.stderr
        assert "`wide`" in done.stderr
        assert "CPU" in done.stderr  # Ray's reason: the resources a replica needs and what there is
        assert time.monotonic() - started < 150
        # What it deployed is being removed from the cluster (Ray Serve gives the unplaced replica its 20 s),
        # which it leaves running for whoever else uses it.
        look = (
            f"import ray; from ray import serve; ray.init(address='127.0.0.1:{port}', log_to_driver=False); "
            "print({n: str(a.status).split('.')[-1] for n, a in serve.status().applications.items()})"
        )
        left = subprocess.run(
            [sys.executable, "-c", look], env=env, capture_output=True, text=True, timeout=120
        )
        assert left.stdout.strip().splitlines()[-1] in ("{}", "{'wide': 'DELETING'}"), left.stderr
    finally:
        subprocess.run([*command, "stop", "--force"], env=env, capture_output=True, timeout=120)
