"""The store on SQLite and on a real PostgreSQL server: migrations, cursor pages that never skip rows made
in the same second, metadata filters by index, conversation chains, two replicas sharing one database, and
a database that is down."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelport.context import DEFAULT_PROJECT
from modelport.errors import NotFoundError, StoreUnavailableError
from modelport.store import Store
from tests.support.postgres import Postgres


# PostgreSQL's run is of the integration tier, as every test that starts it is (tests/conftest.py).
@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.models)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "state.db")
    else:
        server: Postgres = request.getfixturevalue("postgres")
        yield server.database()


def completion(i: int, created: int, model: str = "m") -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{i:04d}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": f"answer {i}"}, "finish_reason": "stop"}
        ],
    }


P = DEFAULT_PROJECT


async def fill(store: Store, count: int) -> list[str]:
    """`count` completions over few distinct seconds, saved in a shuffled order, some models and tags."""
    rows = [(i, 1_700_000_000 + i // 40) for i in range(count)]
    random.Random(7).shuffle(rows)
    for i, created in rows:
        tags = {"parity": "even" if i % 2 == 0 else "odd", "tens": str(i // 10)}
        model = "a" if i % 3 else "b"
        await store.completions.save(completion(i, created, model), {"messages": []}, tags, "completed", P)
    return sorted(f"chatcmpl-{i:04d}" for i in range(count))


async def walk(store: Store, order: str, limit: int, **filters: Any) -> list[str]:
    seen, after = [], None
    while True:
        page = await store.completions.list_page(
            project=P, after=after, limit=limit, order=order, model=None, metadata={}, **filters
        )
        seen += [row["id"] for row in page.rows]
        if not page.has_more:
            return seen
        after = page.rows[-1]["id"]


def test_pages_walk_every_row_once_in_order_even_within_one_second(url: str) -> None:
    async def run() -> None:
        store = Store(url)
        ids = await fill(store, 250)
        assert await walk(store, "asc", 7) == ids
        assert await walk(store, "desc", 13) == ids[::-1]
        await store.close()

    asyncio.run(run())


def test_model_and_metadata_filters_combine(url: str) -> None:
    async def run() -> None:
        store = Store(url)
        await fill(store, 120)
        page = await store.completions.list_page(
            project=P, after=None, limit=100, order="asc", model="b", metadata={"parity": "even", "tens": "3"}
        )
        expected = [f"chatcmpl-{i:04d}" for i in range(30, 40) if i % 2 == 0 and i % 3 == 0]
        assert [row["id"] for row in page.rows] == expected
        assert not page.has_more
        assert await store.completions.set_metadata(expected[0], P, {"parity": "changed"})
        again = await store.completions.list_page(
            project=P, after=None, limit=100, order="asc", model=None, metadata={"tens": "3"}
        )
        assert expected[0] not in [row["id"] for row in again.rows]
        assert not await store.completions.delete(expected[1], "proj_other")  # another project's: no
        assert await store.completions.delete(expected[1], P)
        assert await store.completions.get(expected[1], P) is None
        assert not await store.completions.delete(expected[1], P)
        with pytest.raises(NotFoundError):
            await store.completions.list_page(
                project=P, after="chatcmpl-nope", limit=5, order="asc", model=None, metadata={}
            )
        await store.close()

    asyncio.run(run())


def test_a_nul_character_a_client_sent_is_stored_and_compared_on_both_databases(url: str) -> None:
    """PostgreSQL's text holds no NUL (a metadata value, an id in a URL, a name with one was a 500 there):
    stored and compared as U+FFFD in its columns, kept as sent in the object's JSON."""

    async def run() -> None:
        store = Store(url)
        given = completion(1, 1_700_000_000)
        await store.completions.save(given, {"messages": []}, {"tag": "a\x00b"}, "completed", P)
        page = await store.completions.list_page(
            project=P, after=None, limit=10, order="asc", model=None, metadata={"tag": "a\x00b"}
        )
        assert [row["id"] for row in page.rows] == [given["id"]]
        assert page.rows[0]["metadata"] == {"tag": "a\x00b"}  # the JSON keeps it
        assert await store.completions.get("chatcmpl-\x00", P) is None  # a lookup by such an id: none
        await store.close()

    asyncio.run(run())


def response_row(response_id: str, previous: str | None, text: str) -> dict[str, Any]:
    return {
        "id": response_id,
        "created": 1_700_000_000,
        "model": "m",
        "status": "completed",
        "previous_response_id": previous,
        "background": False,
        "heartbeat": None,
        "metadata": {},
        "request": {},
        "input_items": [{"type": "message", "role": "user", "content": text}],
        "response": {"id": response_id, "output": []},
        "project": P,
    }


def test_a_conversation_chain_is_read_back_in_one_query_oldest_first(url: str) -> None:
    async def run() -> None:
        store = Store(url)
        previous = None
        for turn in range(5):
            await store.responses.save(response_row(f"resp_{turn}", previous, f"turn {turn}"))
            previous = f"resp_{turn}"
        chain = await store.responses.chain("resp_4", P)
        assert [row["id"] for row in chain] == ["resp_0", "resp_1", "resp_2", "resp_3", "resp_4"]
        assert await store.responses.chain("resp_4", "proj_other") == []
        assert await store.responses.chain("resp_missing", P) == []
        assert await store.responses.delete("resp_1", P)
        broken = await store.responses.chain("resp_4", P)
        assert [row["id"] for row in broken] == ["resp_2", "resp_3", "resp_4"]
        assert broken[0]["previous_response_id"] == "resp_1"  # how the service tells the chain was cut
        await store.close()

    asyncio.run(run())


def test_responses_stored_before_the_item_index_are_found_by_their_items(tmp_path: Path) -> None:
    """Migration 0009 indexes the items of the responses already stored, as saving indexes new ones."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    from modelport.store.database import MIGRATIONS

    path = tmp_path / "state.db"

    async def save() -> None:
        store = Store(str(path))
        row = response_row("resp_old", None, "hello")
        row["input_items"][0]["id"] = "msg_in"
        row["response"]["output"] = [{"id": "msg_out", "type": "message", "role": "assistant", "content": []}]
        await store.responses.save(row)
        await store.close()

    async def found() -> list[str | None]:
        store = Store(str(path))
        rows = [await store.responses.with_item(i, P) for i in ("msg_in", "msg_out", "msg_none")]
        assert await store.responses.with_item("msg_in", "proj_other") is None
        await store.close()
        return [row["id"] if row else None for row in rows]

    asyncio.run(save())
    assert asyncio.run(found()) == ["resp_old", "resp_old", None]
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with create_engine(f"sqlite:///{path}").begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0008")  # as a database stored before the index
    assert asyncio.run(found()) == ["resp_old", "resp_old", None]  # opened, so migrated again


def test_a_batch_cancel_is_final_whatever_its_runner_writes_after_it(url: str) -> None:
    # A runner's write that lands after a cancel (its look came before) must not undo it, however the two
    # interleave: each is one conditional statement.
    async def run() -> None:
        store = Store(url)
        batch = {"id": "batch_1", "created_at": 1, "status": "validating", "request_counts": None}
        await store.batches.save(batch, P)
        cancelled = {**batch, "status": "cancelling", "cancelling_at": 5}
        assert await store.batches.cancel("batch_1", cancelled)
        for later in ("in_progress", "failed", "finalizing", "completed"):
            assert await store.batches.put({**batch, "status": later}, "runner") == "cancelling"
        assert (await store.batches.get("batch_1", P))["status"] == "cancelling"
        assert await store.batches.put({**cancelled, "request_counts": {"total": 3}}, "runner") is None
        assert await store.batches.put({**cancelled, "status": "cancelled"}, "runner") is None
        assert await store.batches.put({**cancelled, "status": "cancelling"}, "runner") == "cancelled"
        assert not await store.batches.cancel("batch_1", cancelled)  # an ended batch is not cancelled again
        assert (await store.batches.get("batch_1", P))["status"] == "cancelled"
        # Racing each other on many connections, the cancel always stands.
        for number in range(2, 12):
            batch = {**batch, "id": f"batch_{number}", "status": "validating"}
            await store.batches.save(batch, P)
            _, accepted = await asyncio.gather(
                store.batches.put({**batch, "status": "in_progress"}, "runner"),
                store.batches.cancel(batch["id"], {**batch, "status": "cancelling"}),
            )
            assert accepted  # validating or in progress, whichever it was seen as: cancellable
            assert await store.batches.put({**batch, "status": "completed"}, "runner") == "cancelling"
            stored = await store.batches.get(batch["id"], P)
            assert (stored["status"], stored["batch"]["status"]) == ("cancelling", "cancelling")
        await store.close()

    asyncio.run(run())


def test_an_upload_is_completed_once_and_takes_no_part_past_its_size_on_both_databases(url: str) -> None:
    async def run() -> None:
        store = Store(url)
        upload = {
            "id": "upload_1", "project": P, "created": 1, "expires_at": 100, "status": "pending", "bytes": 8,
            "filename": "a.txt", "purpose": "assistants", "mime_type": "text/plain",
            "file_expires_after": None, "file_id": None,
        }  # fmt: skip
        await store.uploads.save(upload)
        part = {"upload_id": "upload_1", "created": 2, "bytes": 5}
        assert await store.uploads.add_part({**part, "id": "part_1"}, limit=8, now=2)
        assert not await store.uploads.add_part({**part, "id": "part_2"}, limit=8, now=2)  # 10 bytes > 8
        assert not await store.uploads.add_part(
            {**part, "id": "part_3", "bytes": 3}, limit=8, now=101
        )  # late
        assert await store.uploads.add_part({**part, "id": "part_4", "bytes": 3}, limit=8, now=3)
        assert await store.uploads.parts("upload_1") == {"part_1": 5, "part_4": 3}
        file = {"created": 4, "bytes": 8, "filename": "a.txt", "purpose": "assistants", "expires_at": None}
        # Two completions at once: one file made, the other refused; nothing is added after.
        done = await asyncio.gather(
            *(
                store.uploads.complete("upload_1", P, {**file, "id": f"file-{n}", "project": P}, 4)
                for n in (1, 2)
            )
        )
        assert sorted(done) == [False, True]
        made = (await store.uploads.get("upload_1", P))["file_id"]
        assert await store.files.get(made, P) is not None
        assert [await store.files.get(f"file-{n}", P) is not None for n in (1, 2)].count(True) == 1
        assert not await store.uploads.add_part({**part, "id": "part_5", "bytes": 0}, limit=8, now=5)
        assert not await store.uploads.cancel("upload_1", P)
        await store.uploads.save({**upload, "id": "upload_2", "expires_at": 10})
        assert await store.uploads.expire(now=11) == ["upload_2"]
        assert (await store.uploads.get("upload_2", P))["status"] == "expired"
        assert await store.uploads.get("upload_2", "proj_other") is None
        await store.close()

    asyncio.run(run())


def test_two_replicas_migrate_together_and_share_state(postgres: Postgres) -> None:
    url = postgres.database()

    async def run() -> None:
        one, two = Store(url), Store(url)
        await asyncio.gather(one.open(), two.open())  # both migrate at once: the advisory lock orders them
        await one.completions.save(
            completion(1, 1_700_000_000), {"messages": []}, {"from": "one"}, "completed", P
        )
        row = await two.completions.get("chatcmpl-0001", P)
        assert row is not None
        assert row["metadata"] == {"from": "one"}
        await asyncio.gather(one.close(), two.close())

    asyncio.run(run())


@pytest.mark.slow
def test_processes_starting_together_on_a_new_sqlite_file_all_migrate_it(tmp_path: Path) -> None:
    """Servers (or a server and an in-process client) started at once on one new file: each migration is
    one transaction that takes the write lock first, so the others wait and find it done."""
    path = tmp_path / "new.db"
    script = "import asyncio, sys; from modelport.store import Store; asyncio.run(Store(sys.argv[1]).open())"
    starting = [
        subprocess.Popen([sys.executable, "-c", script, str(path)], stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    for process in starting:
        _, errors = process.communicate(timeout=120)
        assert process.returncode == 0, errors
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)


def test_stores_of_one_process_migrating_at_once_each_migrate_their_own(tmp_path: Path) -> None:
    """Services of one process opening new stores together (each on a thread and loop of its own, or several
    on one loop): alembic keeps the migration under way in module globals, so migrations that overlapped ran
    each other's operations on the wrong file (`table … already exists`) or waited for ever (the in-process
    client's first request in a test, once)."""
    failed: list[str] = []

    async def opened(paths: list[Path]) -> None:
        stores = [Store(str(path)) for path in paths]
        for result in await asyncio.gather(*(store.open() for store in stores), return_exceptions=True):
            if isinstance(result, BaseException):
                failed.append(repr(result))
        await asyncio.gather(*(store.close() for store in stores))

    threads = [
        threading.Thread(
            target=asyncio.run, args=(opened([tmp_path / f"{i}-{j}.db" for j in range(2)]),), daemon=True
        )
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not [thread for thread in threads if thread.is_alive()], "a migration waited for ever"
    assert failed == []
    for path in tmp_path.glob("*.db"):
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)


def test_a_migration_frozen_in_another_store_of_the_process_is_a_503_not_a_wait_for_ever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store holding the process's migration (its loop stopped where it stood): this one's opening
    gives up after a SQLite file's busy timeout, as unreachable."""
    from modelport.store import database

    monkeypatch.setattr(database, "_BUSY_TIMEOUT_S", 0.3)
    assert database._MIGRATING.acquire(blocking=False)
    try:
        with pytest.raises(StoreUnavailableError) as caught:
            asyncio.run(asyncio.wait_for(Store(str(tmp_path / "late.db")).open(), 10))  # not for ever
    finally:
        database._MIGRATING.release()
    assert "migrating" in str(caught.value)


def test_a_store_opening_a_file_another_connection_is_writing_waits_for_it(tmp_path: Path) -> None:
    """A file still in rollback-journal mode, as a new one is, with another writer holding its lock: SQLite
    refuses the switch to WAL at once, without its busy timeout, so the store waits for it itself (CI saw one
    of four servers starting together on a new file fail this way)."""
    path = tmp_path / "busy.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE other (a)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO other VALUES (1)")

    async def run() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.5, writer.execute, "COMMIT")
        await Store(str(path)).open()

    asyncio.run(run())
    writer.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)


def test_a_database_that_is_down_is_a_503_and_shows_in_its_state() -> None:
    async def run() -> None:
        store = Store("postgresql://postgres@127.0.0.1:9/none")
        with pytest.raises(StoreUnavailableError) as caught:
            await store.completions.get("x", P)
        assert caught.value.status == 503
        assert store.state()["state"] == "down"
        assert "127.0.0.1:9" in store.state()["url"]

    asyncio.run(run())


def test_the_password_never_shows() -> None:
    store = Store("postgresql://user:s3cret@127.0.0.1:9/db")
    assert "s3cret" not in str(store.state())


def test_chunks_kept_by_an_ingest_are_kept_once_and_go_with_their_file(url: str) -> None:
    # Two replicas working on one file (one took it up from the other, which had only stalled): the places
    # one kept are not kept again by the other, which stops rather than failing the file.
    async def run() -> None:
        store = Store(url)
        row = {"id": "vs_1", "created": 1, "metadata": {}, "model": "m", "last_active": 1, "version": 0}
        await store.vectors.create({**row, "project": P})
        file = {"vector_store_id": "vs_1", "id": "file_1", "created": 1, "status": "in_progress"}
        await store.vectors.attach(
            [{**file, "attributes": {}, "chunking": {}, "usage_bytes": 0, "project": P}]
        )
        pieces = ["one", "two", "three"]
        made = [(text, np.full(4, i, np.float32)) for i, text in enumerate(pieces)]
        assert await store.chunks.draft("vs_1", "file_1", 0, made[:2])
        assert not await store.chunks.draft("vs_1", "file_1", 1, made[1:])
        kept = await store.chunks.drafted("vs_1", "file_1", pieces)
        assert [vector.tolist() for vector in kept] == [[0.0] * 4, [1.0] * 4]
        assert await store.chunks.drafted("vs_1", "file_1", ["cut", "otherwise"]) == []  # and dropped
        assert await store.chunks.drafted("vs_1", "file_1", pieces) == []
        assert await store.chunks.draft("vs_1", "file_1", 0, made)
        assert await store.chunks.complete("vs_1", "file_1", made, 0)
        assert await store.chunks.drafted("vs_1", "file_1", pieces) == []  # completed: drafts gone
        assert not await store.chunks.draft("vs_1", "file_1", 3, made)  # no longer in progress
        assert await store.chunks.texts("vs_1", "file_1") == pieces
        await store.close()

    asyncio.run(run())
