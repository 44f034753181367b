"""Finds model files shipped inside Python packages without importing those packages."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_dir(package: str) -> Path:
    """The folder of an installed package; an error that says how to install it otherwise."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the package `{package}` that ships this model's files is not installed; run scripts/install"
        )
    return Path(next(iter(spec.submodule_search_locations)))
