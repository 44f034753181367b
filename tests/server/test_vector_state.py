"""Vector stores outlive their server (SQLite) and are shared by replicas (PostgreSQL with pgvector); a
file that a stopped server left half-ingested is taken up by the next one."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

from modelport.settings import DEFAULT_EMBEDDING, ModelConfig, Settings, StoreSettings
from tests.support.faces import faces
from tests.support.live import tokens_counted

NOTES = b"The lighthouse keeper rings the brass bell at dawn. The ferry leaves at noon from pier four."


def settings(database: str, *, tiny: bool = False) -> Settings:
    """The default embedding model, or (`tiny`) a tiny one under its name where what is checked is the
    server's, not the search's."""
    tiny_embedder = ModelConfig(id=DEFAULT_EMBEDDING, predictor="tests.predictors.tiny_models:trigram_embed")
    models = [tiny_embedder if tiny else ModelConfig(id=DEFAULT_EMBEDDING, engine="onnx-embedding")]
    return Settings(defaults=False, models=models, store=StoreSettings(url=database))


def ready(client: Any, store_id: str) -> Any:
    deadline = time.monotonic() + 60
    while (store := client.vector_stores.retrieve(store_id)).status != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return store


def test_a_store_outlives_its_server_and_is_shared_by_replicas(tmp_path: Path, postgres: Any) -> None:
    for database in (str(tmp_path / "state.db"), postgres.database()):
        with faces(settings(database)) as first:
            file = first.http.files.create(file=("notes.txt", NOTES), purpose="assistants")
            made = first.http.vector_stores.create(name="harbour", file_ids=[file.id])
            ready(first.http, made.id)
        with faces(settings(database)) as again, faces(settings(database)) as beside:
            for served in (again, beside):
                found = served.http.vector_stores.search(made.id, query="when does the ferry leave?")
                assert found.data[0].file_id == file.id
                assert "pier four" in found.data[0].content[0].text
            # A file added through one replica is found through the other.
            more = again.http.files.create(file=("more.txt", b"Tea is served at five."), purpose="assistants")
            again.http.vector_stores.files.create_and_poll(more.id, vector_store_id=made.id)
            found = beside.http.vector_stores.search(made.id, query="tea time", max_num_results=1)
            assert found.data[0].file_id == more.id


def test_a_file_left_in_progress_is_taken_up_at_the_next_start(tmp_path: Path) -> None:
    database = str(tmp_path / "state.db")
    with faces(settings(database, tiny=True)) as first:
        file = first.http.files.create(file=("notes.txt", NOTES), purpose="assistants")
        made = first.http.vector_stores.create(file_ids=[file.id])
        ready(first.http, made.id)
    # As a server stopped mid-ingest leaves it: in progress, no chunks, its heartbeat long gone.
    with sqlite3.connect(database) as db:
        db.execute("UPDATE vector_store_files SET status = 'in_progress', heartbeat = 0")
        db.execute("DELETE FROM vector_chunks")
    with faces(settings(database, tiny=True)) as again:
        assert ready(again.http, made.id).file_counts.completed == 1
        assert again.http.vector_stores.search(made.id, query="bell").data


def test_a_file_attached_by_requests_sent_together_is_put_in_and_ingested_once(
    tmp_path: Path, postgres: Any
) -> None:
    # Each request looked for the file, then put it in: two at once both put it in (a 500 for the second,
    # 11 of 20 on SQLite), and each started its own ingest of it.
    for database in (str(tmp_path / "state.db"), postgres.database()):
        with faces(settings(database)) as served:
            attached_together(served.url, served.http)


def attached_together(url: str, client: Any) -> None:
    file = client.files.create(file=("notes.txt", NOTES), purpose="assistants")
    alone = client.vector_stores.create(name="alone")
    before = tokens_counted(url, DEFAULT_EMBEDDING, "prompt")
    client.vector_stores.files.create_and_poll(file.id, vector_store_id=alone.id)
    once = tokens_counted(url, DEFAULT_EMBEDDING, "prompt") - before
    made = client.vector_stores.create(name="together")

    async def attach() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=f"{url}/v1", timeout=60) as http:
            path = f"/vector_stores/{made.id}/files"
            return await asyncio.gather(*(http.post(path, json={"file_id": file.id}) for _ in range(20)))

    before = tokens_counted(url, DEFAULT_EMBEDDING, "prompt")
    answers = asyncio.run(attach())
    assert [a.status_code for a in answers] == [200] * 20
    assert {a.json()["id"] for a in answers} == {file.id}
    assert ready(client, made.id).file_counts.model_dump() == {
        "cancelled": 0, "completed": 1, "failed": 0, "in_progress": 0, "total": 1
    }  # fmt: skip
    assert tokens_counted(url, DEFAULT_EMBEDDING, "prompt") - before == once > 0
