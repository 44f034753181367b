"""A PostgreSQL server of one test or benchmark run: Debian's PostgreSQL 15, in a temporary folder, on
127.0.0.1, started as the unprivileged `postgres` user when run as root (the server refuses root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.live import free_port


def postgres_binaries() -> Path | None:
    """The folder of `initdb` and `pg_ctl` (`apt-get install postgresql`), if installed."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return found[-1].parent if found else None


def has_pgvector(binaries: Path) -> bool:
    """Whether pgvector (the `vector` extension, which modelport's PostgreSQL store needs) is installed for
    this PostgreSQL: Debian's PostgreSQL 15 comes without it (`scripts/install-pgvector` builds it)."""
    found = subprocess.run(
        [str(binaries / "pg_config"), "--sharedir"], capture_output=True, text=True, check=False, timeout=30
    )
    if found.returncode != 0:  # no pg_config (postgresql-server-dev-*): look where Debian puts it
        share = Path("/usr/share/postgresql") / binaries.parent.name
    else:
        share = Path(found.stdout.strip())
    return (share / "extension" / "vector.control").exists()


class Postgres:
    """One PostgreSQL server and the empty databases made on it; `durable=False` (tests) skips fsync."""

    def __init__(self, binaries: Path, durable: bool = False) -> None:
        self.binaries = binaries
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="modelport-pg-"))
        self.data = self.folder / "data"
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.folder, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        if not durable:
            options += " -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "start"
        )
        self._databases = 0

    def database(self) -> str:
        """The URL of a new, empty database."""
        self._databases += 1
        name = f"modelport_{self._databases}"
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self.as_user, str(self.binaries / tool), *args], check=True, capture_output=True, timeout=120
        )
