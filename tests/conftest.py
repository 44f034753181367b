"""Fixtures: both faces of the default models (one service, served over HTTP in this process and called
in-process), both faces of the tiny predictors, and PostgreSQL; and how the run shares the machine among
its pytest-xdist workers (CONTRIBUTING.md). The helpers live in `tests.support`."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from xdist.scheduler import LoadScopeScheduling

import modelport
from modelport import machine
from modelport.settings import Settings
from tests.support.configs import tiny_settings
from tests.support.faces import Faces, faces
from tests.support.postgres import Postgres, has_pgvector, postgres_binaries

# Everything the tests' servers and clients store goes to a folder of this run (of this worker, when the
# run has several), not the user's data directory.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER or "MODELPORT_DATA_DIR" not in os.environ:
    os.environ["MODELPORT_DATA_DIR"] = tempfile.mkdtemp(prefix=f"modelport-test-data-{_WORKER or ''}")
# The servers the tests start run this CPU's llama.cpp build if the machine has one, but none starts a build
# (minutes of compiling beside the tests); tests/engines/test_engine_build.py sets its own.
os.environ.setdefault("MODELPORT_LLAMACPP_BUILD", "cached")
FACES = ["http", "in-process"]


@pytest.fixture(scope="session")
def server() -> Iterator[Faces]:
    """The default models, loaded once, behind both faces."""
    with faces(Settings()) as served:
        yield served


@pytest.fixture(scope="session")
def http_client(server: Faces) -> openai.OpenAI:
    return server.http


@pytest.fixture(scope="session")
def inprocess_client(server: Faces) -> modelport.OpenAI:
    return server.inprocess


@pytest.fixture
def client(request: pytest.FixtureRequest, server: Faces) -> openai.OpenAI:
    """The default models through the SDK over HTTP, or through the in-process client: each test using this
    runs on both, unless it is marked `one_face` (`pytest_generate_tests`)."""
    return server.face(request.param)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Where the faces differ (streams, binary answers, uploads, errors, the SDK's helpers), a test of the
    real models runs on both; where they cannot (the model's own work: sampling, decoding, transcribing,
    searching — one operation table, one service call behind both), a test marked `one_face` runs on one,
    each such test on its own face by a hash of its name, so that both faces still run about half of them.
    `both_faces` on a test overrides its module's `one_face`."""
    if "client" not in metafunc.fixturenames:
        return
    node = metafunc.definition
    once = node.get_closest_marker("one_face") is not None and node.get_closest_marker("both_faces") is None
    chosen = [FACES[zlib.crc32(node.name.encode()) % len(FACES)]] if once else FACES
    metafunc.parametrize("client", chosen, indirect=True)


@pytest.fixture(scope="session")
def tiny_faces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    """The tiny predictors (`tests.support.configs.TINY`), storing in a database of their own."""
    with faces(tiny_settings(str(tmp_path_factory.mktemp("tiny") / "state.db"))) as served:
        yield served


@pytest.fixture(params=FACES)
def tiny(request: pytest.FixtureRequest, tiny_faces: Faces) -> Any:
    """The tiny predictors, over each face in turn."""
    return tiny_faces.face(request.param)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """PostgreSQL 15 from Debian's packages with pgvector (`.ci/run` installs both); skipped where either is
    missing, unless MODELPORT_REQUIRE_POSTGRES is set (as CI sets it), where its absence is a failure."""
    binaries = postgres_binaries()
    missing = None
    if binaries is None:
        missing = "PostgreSQL is not installed (apt-get install postgresql)"
    elif not has_pgvector(binaries):
        missing = (
            "pgvector is not installed for this PostgreSQL (as root: apt-get install "
            "postgresql-server-dev-15 build-essential curl && scripts/install-pgvector)"
        )
    if missing is not None:
        if os.environ.get("MODELPORT_REQUIRE_POSTGRES"):
            pytest.fail(missing)
        pytest.skip(missing)
    assert binaries is not None
    served = Postgres(binaries)
    yield served
    served.stop()


# Fixtures that load the default models or start PostgreSQL: a test that uses one is of the `models` tier.
_LOADING = {"server", "client", "http_client", "inprocess_client", "postgres"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that load real models (through the shared fixtures) as `models`; what is left of the
    quick loop without them is the unit tier (`-m "not slow and not models"`, CONTRIBUTING.md)."""
    for item in items:
        if _LOADING & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.models)


# Several workers (pytest-xdist, `-n auto` in pyproject.toml): each is given its share of the CPUs, so that
# the engines of one never spin against another's at llama.cpp's barriers (two workers' 2-thread decodes on 2
# CPUs crawl), and a worker waiting on a server's start leaves its CPU to the other.
_MACHINE_CPUS = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()


class _ByFile(LoadScopeScheduling):
    """One worker runs a whole file (its module fixtures start once), and every Ray test (one Ray instance
    a machine). (xdist's own `loadgroup` cannot say so under pytest 9: it renames items by a field pytest no
    longer reads.)"""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::")[0]
        return "ray" if path.startswith("tests/cluster/") else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> _ByFile:
    return _ByFile(config, log)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker a CPU, as many as memory holds (each loads the default models: 8 GiB a worker
    leaves room for the servers and replicas the tests start), at most 8."""
    return max(1, min(machine.usable_cpus(), machine.total_memory() // (8 << 30), 8))


def pytest_configure(config: pytest.Config) -> None:
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if _WORKER and _MACHINE_CPUS and count > 1:
        cpus, index = sorted(_MACHINE_CPUS), int(_WORKER.removeprefix("gw"))
        os.sched_setaffinity(0, cpus[index % len(cpus) :: count] or cpus)


# The workers' turns on the machine: lock files of the run, made where it starts (its workers inherit this).
if "MODELPORT_TEST_TURNS" not in os.environ:
    os.environ["MODELPORT_TEST_TURNS"] = tempfile.mkdtemp(prefix="modelport-test-turns-")
_TURNS = Path(os.environ["MODELPORT_TEST_TURNS"])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """A `whole_machine` test (thread placement, a 2-CPU Ray instance) runs on every CPU of the machine,
    whatever its worker's share (what it starts keeps them); an `alone` test, with no other test running."""
    alone = item.get_closest_marker("alone") is not None
    share = os.sched_getaffinity(0) if _MACHINE_CPUS else set()
    wide = alone or item.get_closest_marker("whole_machine") is not None
    widen = wide and share not in (set(), _MACHINE_CPUS)
    with _turn(alone) if _WORKER else contextlib.nullcontext():
        if widen:
            os.sched_setaffinity(0, _MACHINE_CPUS)
        try:
            return (yield)
        finally:
            if widen:
                os.sched_setaffinity(0, share)


@contextlib.contextmanager
def _turn(alone: bool) -> Iterator[None]:
    """A readers-writer lock over the workers, with a turnstile so that an `alone` test waiting for the
    machine is not passed by the other workers' next tests: they each hold `machine` shared while a test
    runs, an `alone` test holds it exclusively. POSIX record locks, which are the process's own: a `flock`
    lives as long as its file's descriptor, which a process forked during the test (a pool's worker) keeps
    open after the test, holding the machine for ever."""
    with open(_TURNS / "gate", "a+") as gate, open(_TURNS / "machine", "a+") as room:
        fcntl.lockf(gate, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.lockf(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.lockf(gate, fcntl.LOCK_UN)
        yield


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave without finalising the interpreter: a llama.cpp request thread still inside C++ when Python
    finalises is unwound by `pthread_exit` through a `catch (...)`, and the process aborts (`FATAL:
    exception not rethrown`, exit 134) after every test has passed — seen in some runs of several test
    files together."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_STATUS[-1] if _EXIT_STATUS else 0)
