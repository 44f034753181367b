"""What a test run leaves on the machine: nothing of its own outside pytest's `tmp_path` folders (which pytest
keeps for the last three runs), whether its tests ran in one process or in several workers."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.live import ROOT, Served, free_port

# What the run this test is part of set for its own processes, which a run started here must make anew.
_RUN_ENVIRONMENT = (
    "MODELPORT_DATA_DIR",
    "MODELPORT_TEST_TURNS",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
)
MODULE = "tests/test_deselected_modules.py"  # a few quick tests, run by the run started here


def test_a_server_s_log_goes_with_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    port = free_port()
    served = Served([sys.executable, "-m", "http.server", "-b", "127.0.0.1", str(port)], port, "/")
    try:
        served.wait_ready(30)
        assert served.log.exists()
    finally:
        served.stop()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # two workers' start
@pytest.mark.parametrize("workers", [["-n", "0"], ["-n", "2"]], ids=["one process", "two workers"])
def test_a_run_leaves_nothing_in_the_temporary_folder_but_pytest_s_own(
    workers: list[str], tmp_path: Path
) -> None:
    environment = {name: value for name, value in os.environ.items() if name not in _RUN_ENVIRONMENT}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers, MODULE],
        cwd=ROOT, env={**environment, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith("pytest-of-")) == []
