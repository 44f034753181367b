"""State across processes: it survives a restart (SQLite), two servers share it (PostgreSQL), a background
response whose server was killed is marked failed once its job is seen to be dead, and a batch whose server
was killed resumes without running a finished line again, and a vector store file whose server was killed
while it embedded it is taken up by the next server within the ingest lease."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from modelport.store import Store
from tests.support.configs import TINY
from tests.support.live import ROOT, LiveServer
from tests.support.postgres import Postgres

pytestmark = pytest.mark.slow
# Seconds a stopped server's background response, batch or ingest lease is given before another takes it as
# dead (15, 10 and 15 by default): short here, so the tests do not wait for the defaults.
DEAD_AFTER = 3


def start(folder: Path, *args: str, port: int | None = None) -> LiveServer:
    (folder / "models.toml").write_text(TINY)
    live = LiveServer("--config", str(folder / "models.toml"), *args, cwd=ROOT, port=port)
    live.wait_ready()
    return live


def sdk(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=60)


def test_state_survives_a_restart_on_sqlite(tmp_path: Path) -> None:
    database = str(tmp_path / "state.db")
    first = start(tmp_path, "--database", database)
    try:
        client = sdk(first)
        stored = client.chat.completions.create(
            model="reverse", messages=[{"role": "user", "content": "kept across restarts"}], store=True
        )
        turn = client.responses.create(model="recall", input="remember me")
    finally:
        first.stop()
    second = start(tmp_path, "--database", database, port=first.port)
    try:
        client = sdk(second)
        assert (
            client.chat.completions.retrieve(stored.id).choices[0].message.content == "restarts across kept"
        )
        follow_up = client.responses.create(model="recall", input="and now?", previous_response_id=turn.id)
        assert follow_up.output_text.startswith("user: remember me / assistant: user: remember me")
    finally:
        second.stop()


def test_two_servers_share_one_postgresql_database(tmp_path: Path, postgres: Postgres) -> None:
    database = postgres.database()
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = start(tmp_path / "one", "--database", database)
    two = start(tmp_path / "two", "--database", database)
    try:
        a, b = sdk(one), sdk(two)
        made = a.chat.completions.create(
            model="reverse", messages=[{"role": "user", "content": "x y"}], store=True, metadata={"on": "one"}
        )
        assert b.chat.completions.retrieve(made.id).metadata == {"on": "one"}
        turn = a.responses.create(model="recall", input="started on one")
        continued = b.responses.create(model="recall", input="continued on two", previous_response_id=turn.id)
        assert "started on one" in continued.output_text
        assert [c.id for c in b.chat.completions.list(metadata={"on": "one"})] == [made.id]
    finally:
        one.stop()
        two.stop()


def test_a_background_response_of_a_killed_server_is_marked_failed(tmp_path: Path) -> None:
    database = str(tmp_path / "state.db")
    config = tmp_path / "models.toml"
    config.write_text(
        f"defaults = false\n[store]\nbackground_timeout = {DEAD_AFTER}\n"
        '[[models]]\nid = "smollm2-135m-instruct"\nengine = "llamacpp"\nn_parallel = 1\n'
    )
    first = LiveServer("--config", str(config), "--database", database, cwd=ROOT)
    first.wait_ready()
    client = sdk(first)
    started = client.responses.create(
        model="smollm2-135m-instruct",
        input="Tell me a very long story.",
        max_output_tokens=4000,
        background=True,
        extra_body={"logit_bias": {"0": -100, "2": -100}},
    )
    time.sleep(1.0)
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait()
    first.stop()
    second = LiveServer("--config", str(config), "--database", database, cwd=ROOT)
    second.wait_ready()
    try:
        client = sdk(second)
        deadline = time.monotonic() + DEAD_AFTER + 10
        while (seen := client.responses.retrieve(started.id)).status in ("queued", "in_progress"):
            assert time.monotonic() < deadline, "the dead job's response was never marked failed"
            time.sleep(0.5)
        assert seen.status == "failed"
        assert seen.error is not None
        assert "stopped before it finished" in seen.error.message
    finally:
        second.stop()


def _killed_mid_batch(tmp_path: Path) -> tuple[list[str], Any, list[dict[str, Any]], Path, str]:
    """A server of the `counted` chat predictor killed with a batch of 150 lines under way: the command that
    starts it again (on the same store), the batch, its lines, the file each call is recorded in, and the
    batch's input file id."""
    calls = tmp_path / "calls.txt"
    config = tmp_path / "models.toml"
    predictor = "tests.predictors.tiny_models:counted_chat"
    config.write_text(
        f"defaults = false\n[batches]\nlease = {DEAD_AFTER}\n"
        f'[[models]]\nid = "counted"\npredictor = "{predictor}"\n'
    )
    database = str(tmp_path / "state.db")
    first = LiveServer("--config", str(config), "--database", database, cwd=ROOT, env=_counted(calls))
    first.wait_ready()
    client = sdk(first)
    lines = [
        {"custom_id": f"line-{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "counted", "messages": [{"role": "user", "content": f"line-{i}"}]}}
        for i in range(150)
    ]  # fmt: skip
    content = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    uploaded = client.files.create(file=("lines.jsonl", content), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 60
    while not calls.exists() or len(calls.read_text().splitlines()) < 40:
        assert time.monotonic() < deadline, "the batch did not begin"
        time.sleep(0.05)
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait()
    first.stop()
    return ["--config", str(config), "--database", database], batch, lines, calls, uploaded.id


def _recorded(database: Path, batch_id: str) -> set[str]:
    """The custom ids of the batch's lines whose results the store holds."""

    async def read() -> set[str]:
        store = Store(str(database))
        try:
            return {output["custom_id"] for _, output in await store.batches.results(batch_id)}
        finally:
            await store.close()

    return asyncio.run(read())


def _counted(calls: Path) -> dict[str, str]:
    """Where the calls are recorded, and the data folder (uploaded files) beside that file."""
    return {"MODELPORT_TEST_CALLS": str(calls), "MODELPORT_DATA_DIR": str(calls.parent / "data")}


def test_a_batch_resumes_after_a_kill_without_running_a_finished_line_again(tmp_path: Path) -> None:
    args, batch, lines, calls, _ = _killed_mid_batch(tmp_path)
    before = calls.read_text().splitlines()
    recorded = _recorded(tmp_path / "state.db", batch.id)
    second = LiveServer(*args, cwd=ROOT, env=_counted(calls))
    second.wait_ready()
    try:
        client = sdk(second)
        deadline = time.monotonic() + DEAD_AFTER + 60
        while (done := client.batches.retrieve(batch.id)).status != "completed":
            assert time.monotonic() < deadline, f"the batch did not resume: {done.status}"
            time.sleep(0.5)
        output = [json.loads(line) for line in client.files.content(done.output_file_id).content.splitlines()]
        assert sorted(o["custom_id"] for o in output) == sorted(line["custom_id"] for line in lines)
        made = calls.read_text().splitlines()
        assert sorted(set(made)) == sorted(line["custom_id"] for line in lines)
        # A line whose result was recorded before the kill never ran again; those the model had answered
        # but whose results were not yet recorded (several workers wait on the store) ran once more.
        again = made[len(before) :]
        assert recorded
        assert not recorded & set(again)
        assert sorted(again) == sorted(set(again))
        assert len(before) >= 40
    finally:
        second.stop()


def test_a_batch_whose_input_was_deleted_while_it_ran_fails_when_it_is_taken_up(tmp_path: Path) -> None:
    # Taken up again with its input gone, a batch once stayed `in_progress` for good, a traceback every 5 s.
    args, batch, _, calls, file_id = _killed_mid_batch(tmp_path)
    (tmp_path / "data" / "files" / file_id).unlink()  # its bytes gone while no server ran it
    second = LiveServer(*args, cwd=ROOT, env=_counted(calls))
    second.wait_ready()
    try:
        client = sdk(second)
        deadline = time.monotonic() + DEAD_AFTER + 60
        while (ended := client.batches.retrieve(batch.id)).status == "in_progress":
            assert time.monotonic() < deadline, "the batch was not taken up"
            time.sleep(0.5)
        assert ended.status == "failed"
        assert ended.errors is not None
        error = (ended.errors.data or [])[0]
        assert (error.code, error.param) == ("invalid_request", "file_id")
        assert file_id in (error.message or "")
    finally:
        second.stop()


def test_a_file_being_ingested_by_a_killed_server_is_taken_up_by_the_next(tmp_path: Path) -> None:
    from modelport.service.vectors.ingest import LOOK

    config = tmp_path / "models.toml"
    config.write_text(
        'defaults = false\n[[models]]\nid = "all-minilm-l6-v2"\nengine = "onnx-embedding"\n'
        f"[vector_stores]\nlease = {DEAD_AFTER}\n"
    )
    database = str(tmp_path / "state.db")
    first = LiveServer("--config", str(config), "--database", database, cwd=ROOT)
    first.wait_ready()
    client = sdk(first)
    # ~6 s of embedding on 2 cores (the model is loaded: `wait_ready`), long enough to be killed 2 s into.
    text = "\n\n".join(
        f"Paragraph {i}: the vault number {i * 7919 % 10007} opens door {i}." for i in range(800)
    )
    uploaded = client.files.create(file=("notes.txt", text.encode()), purpose="assistants")
    store = client.vector_stores.create(name="notes", file_ids=[uploaded.id])
    time.sleep(2.0)
    assert client.vector_stores.files.retrieve(uploaded.id, vector_store_id=store.id).status == "in_progress"
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait()
    first.stop()
    second = LiveServer("--config", str(config), "--database", database, cwd=ROOT)
    second.wait_ready()
    restarted = time.monotonic()
    try:
        client = sdk(second)
        while not [line for line in second.log.read_text().splitlines() if "taking up file" in line]:
            assert time.monotonic() < restarted + DEAD_AFTER + LOOK + 5, (
                "the file left in progress was not taken up"
            )
            time.sleep(0.2)
        taken_up = time.monotonic() - restarted
        deadline = restarted + DEAD_AFTER + LOOK + 120
        while (seen := client.vector_stores.files.retrieve(uploaded.id, vector_store_id=store.id)).status == (
            "in_progress"
        ):
            assert time.monotonic() < deadline, "the file left in progress was never taken up"
            time.sleep(0.5)
        assert seen.status == "completed", seen.last_error
        found = client.vector_stores.search(store.id, query="which door does vault number 7919 open?")
        assert found.data
        completed = time.monotonic() - restarted
        print(f"ingest taken up {taken_up:.1f} s, completed {completed:.1f} s after the restart")
    finally:
        second.stop()
