"""The Ray tests are skipped where the `ray` extra is not installed. Ray is imported by the tests that run,
not when the files are collected: a second of imports on every worker, for tests most runs deselect."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="package")
def _ray_serve() -> None:
    pytest.importorskip("ray.serve", reason="the ray extra is not installed")
