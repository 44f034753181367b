"""The database connection: opened once (its migrations applied), watched, and closed.

SQLite (through aiosqlite) by default, in a file; PostgreSQL (through asyncpg) for several modelport
replicas sharing state. Every operation runs in a transaction; one that fails because the database is
unreachable marks the store down (in the log and `/health`) and answers 503, never a silent loss.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import sqlalchemy.exc
from alembic import command
from alembic.config import Config
from sqlalchemy import event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from modelport.errors import StoreUnavailableError

log = logging.getLogger("modelport.store")
MIGRATIONS = Path(__file__).parent / "migrations"
_MIGRATION_LOCK = 0x6D6F64656C706F  # PostgreSQL advisory lock: one replica migrates at a time
_BUSY_TIMEOUT_S = 30  # how long a SQLite connection waits for another's write lock
# Alembic keeps the migration under way in module globals (`alembic.context`, `alembic.op`): two stores
# migrating at once in one process (services on threads of their own, or two on one loop, whose migrations
# interleave at every statement awaited) ran each other's operations on the wrong connection (`table …
# already exists` on a new file) or waited for ever. One migration at a time in a process.
_MIGRATING = threading.Lock()


def async_url(url: str) -> str:
    """The SQLAlchemy URL with the async driver: `sqlite:///x.db` or a path → aiosqlite, `postgresql://`
    → asyncpg."""
    if "://" not in url:
        return f"sqlite+aiosqlite:///{Path(url).expanduser()}"
    parsed = make_url(url)
    driver = {
        "sqlite": "sqlite+aiosqlite",
        "postgresql": "postgresql+asyncpg",
        "postgres": "postgresql+asyncpg",
    }
    name = driver.get(parsed.drivername, parsed.drivername)
    return parsed.set(drivername=name).render_as_string(hide_password=False)


class Database:
    """One engine, opened on first use; `state()` says whether it is reachable."""

    def __init__(self, url: str) -> None:
        self.url = async_url(url)
        self.shown = make_url(self.url).render_as_string(hide_password=True)
        self._engine: AsyncEngine | None = None
        self._opening = asyncio.Lock()
        self._error: str | None = None
        self._failed_at = 0.0

    @property
    def sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    def state(self) -> dict[str, Any]:
        """What `/health` says of the store (the URL without its password)."""
        report: dict[str, Any] = {"url": self.shown, "state": "down" if self._error else "up"}
        if self._engine is None and not self._error:
            report["state"] = "not opened"
        if self._error:
            report["last_error"] = self._error
        return report

    async def open(self) -> AsyncEngine:
        """The engine, created and migrated to the latest schema on first use."""
        if self._engine is not None:
            return self._engine
        async with self._opening:
            if self._engine is None:
                engine = self._create()
                try:
                    await self._first_connection(engine)
                except (OSError, sqlalchemy.exc.SQLAlchemyError) as error:
                    await engine.dispose()
                    raise self._down(error) from error
                self._engine = engine
                log.info("store: %s", self.shown)
        return self._engine

    async def close(self) -> None:
        """Release the connections."""
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    async def ping(self) -> None:
        """A round trip to the database."""
        async with self.transaction() as connection:
            await connection.execute(text("SELECT 1"))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a transaction: committed if the block ends normally, rolled back otherwise."""
        engine = await self.open()
        try:
            async with engine.begin() as connection:
                yield connection
        except (OSError, sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError) as error:
            raise self._down(error) from error
        except sqlalchemy.exc.DBAPIError as error:
            if error.connection_invalidated:
                raise self._down(error) from error
            raise
        if self._error:
            log.info("store: %s is reachable again", self.shown)
            self._error = None

    def _down(self, error: BaseException) -> StoreUnavailableError:
        message = str(getattr(error, "orig", None) or error).strip().splitlines()[0][:300]
        if self._error is None or time.monotonic() - self._failed_at > 60:
            log.error("store: %s is unreachable: %s", self.shown, message)
        self._error, self._failed_at = message, time.monotonic()
        return StoreUnavailableError(f"The store ({self.shown}) is unreachable: {message}")

    def _create(self) -> AsyncEngine:
        if self.sqlite:
            database = make_url(self.url).database
            if database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            engine = create_async_engine(self.url, connect_args={"timeout": _BUSY_TIMEOUT_S})

            @event.listens_for(engine.sync_engine, "connect")
            def _pragmas(connection: Any, _: Any) -> None:
                cursor = connection.cursor()
                # WAL: readers never wait for the writer; foreign keys: deletes cascade.
                for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
                    cursor.execute(f"PRAGMA {pragma}")
                cursor.close()

            return engine
        return create_async_engine(self.url, pool_pre_ping=True, pool_size=10, max_overflow=20)

    async def _first_connection(self, engine: AsyncEngine) -> None:
        """Connect and migrate; on a SQLite file another process is writing, wait for it as its busy
        timeout would.

        A file still in rollback-journal mode (a new one) needs its exclusive lock to switch to WAL, and
        SQLite answers "database is locked" at once, without its busy handler, to a reader asking for it
        while another connection holds the write lock (so two cannot deadlock): the case of servers starting
        together on one new file.
        """
        deadline, pause = time.monotonic() + _BUSY_TIMEOUT_S, 0.01
        while True:
            try:
                async with _alone(), engine.begin() as connection:
                    await self._migrate(connection)
                return
            except sqlalchemy.exc.OperationalError as error:
                if not self.sqlite or "locked" not in str(error.orig) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.25)

    async def _migrate(self, connection: AsyncConnection) -> None:
        # One process migrates at a time, and a migration is all or nothing: a server stopped halfway, or two
        # starting together on a new database, must not leave tables behind without their version stamp.
        if self.sqlite:
            # Python's sqlite3 runs DDL outside any transaction unless one is begun explicitly; IMMEDIATE
            # takes the write lock now, so a second migrator waits (busy_timeout) and then finds it done.
            await connection.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        await connection.run_sync(_upgrade)


@asynccontextmanager
async def _alone() -> AsyncIterator[None]:
    """The process's one migration slot, waited for without holding up the loop (a lock taken in a worker
    thread would stay taken when its waiter is cancelled), as long as a SQLite file's lock is: a migration
    frozen where it stood (its loop stopped) is a store unreachable, not a wait for ever."""
    given_up = time.monotonic() + _BUSY_TIMEOUT_S
    while not _MIGRATING.acquire(blocking=False):  # a lock of threads: no loop's event tells when it is free
        if time.monotonic() > given_up:
            raise TimeoutError(f"another store of this process has been migrating for {_BUSY_TIMEOUT_S} s")
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        _MIGRATING.release()


def _upgrade(connection: Connection) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
