"""Vector stores outlive their server (SQLite) and are shared by replicas (PostgreSQL with pgvector); a
file that a stopped server left half-ingested is taken up by the next one."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from modelport.settings import DEFAULT_EMBEDDING, ModelConfig, Settings, StoreSettings
from tests.support.faces import faces

NOTES = b"The lighthouse keeper rings the brass bell at dawn. The ferry leaves at noon from pier four."


def settings(database: str) -> Settings:
    models = [ModelConfig(id=DEFAULT_EMBEDDING, engine="onnx-embedding")]
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
    with faces(settings(database)) as first:
        file = first.http.files.create(file=("notes.txt", NOTES), purpose="assistants")
        made = first.http.vector_stores.create(file_ids=[file.id])
        ready(first.http, made.id)
    # As a server stopped mid-ingest leaves it: in progress, no chunks, its heartbeat long gone.
    with sqlite3.connect(database) as db:
        db.execute("UPDATE vector_store_files SET status = 'in_progress', heartbeat = 0")
        db.execute("DELETE FROM vector_chunks")
    with faces(settings(database)) as again:
        assert ready(again.http, made.id).file_counts.completed == 1
        assert again.http.vector_stores.search(made.id, query="bell").data
