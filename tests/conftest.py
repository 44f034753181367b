"""Fixtures: both faces of the default models (one service, served over HTTP in this process and called
in-process), both faces of the tiny predictors, and PostgreSQL. How the run shares the machine among its
pytest-xdist workers is the plugin `tests.support.workers` (CONTRIBUTING.md); the helpers live in
`tests.support`."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.certificates import authority

# The server and the SDK are imported by the fixtures that start them: pytest-xdist's controller loads this
# file too, and runs no test (the workers start only once it has loaded).
if TYPE_CHECKING:
    import openai

    import modelport
    from tests.support.faces import Faces
    from tests.support.postgres import Postgres

# Where the environment says not to write bytecode (this machine's image sets PYTHONDONTWRITEBYTECODE), every
# process of a run would compile the sources again, and pytest rewrite every test module again: 6 s and more
# a worker, and 2 s for each server or command a test starts. The run writes the caches (`__pycache__`,
# ignored by git); what it starts reads them.
sys.dont_write_bytecode = False

# What this process of the run (a worker, or the run's own) keeps outside the tests' `tmp_path`: a folder
# of its own, removed as the process ends (`pytest_unconfigure`; a run left up to 17 MiB a worker in /tmp).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
_FOLDER = Path(tempfile.mkdtemp(prefix=f"modelport-test-{_WORKER or 'run'}-"))
# Everything the tests' servers and clients store goes to a folder of this run (of this worker, when the
# run has several), not the user's data directory.
if _WORKER or "MODELPORT_DATA_DIR" not in os.environ:
    os.environ["MODELPORT_DATA_DIR"] = str(_FOLDER / "data")
# The servers the tests start run this CPU's llama.cpp build if the machine has one, but none starts a build
# (minutes of compiling beside the tests); tests/engines/test_engine_build.py sets its own.
os.environ.setdefault("MODELPORT_LLAMACPP_BUILD", "cached")
# The tests reach no machine but this one, over plain HTTP, so the run trusts one authority of its own; with
# the machine's store, each HTTP client a test or a server made (the SDK's, httpx's; ~600 in the unit tier)
# loaded its 140-odd certificates first: 10-35 ms of CPU each, a sixth of the unit tier's.
(_FOLDER / "authority").mkdir()
os.environ["SSL_CERT_FILE"] = str(authority(_FOLDER / "authority")[0])
os.environ.pop("SSL_CERT_DIR", None)
FACES = ["http", "in-process"]
pytest_plugins = ["tests.support.workers", "tests.support.deselected_modules"]


@pytest.fixture(scope="session")
def server() -> Iterator[Faces]:
    """The default models, loaded once, behind both faces."""
    from modelport.settings import Settings
    from tests.support.faces import faces

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
    from tests.support.configs import tiny_settings
    from tests.support.faces import faces

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
    from tests.support.postgres import Postgres, has_pgvector, postgres_binaries

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


def pytest_unconfigure() -> None:
    """The process's folder goes as its run ends: its fixtures, and the servers they started, are stopped."""
    shutil.rmtree(_FOLDER, ignore_errors=True)


# Fixtures that load the default models or start PostgreSQL: a test that uses one is of the `models` tier.
_LOADING = {"server", "client", "http_client", "inprocess_client", "postgres"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that load real models (through the shared fixtures) as `models`; what is left of the
    quick loop without them is the unit tier (`-m "not slow and not models"`, CONTRIBUTING.md)."""
    for item in items:
        if _LOADING & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.models)
