"""Finds model files shipped inside Python packages without importing those packages."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path


def package_dir(package: str) -> Path:
    """The folder of an installed package; an error that says how to install it otherwise."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the package `{package}` that ships this model's files is not installed; run scripts/install"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def cache_dir() -> Path:
    """Where files assembled from packages are kept: `$MODELPORT_CACHE`, else `~/.cache/modelport`."""
    return Path(os.environ.get("MODELPORT_CACHE") or Path.home() / ".cache" / "modelport")


def assemble(name: str, files: dict[str, list[Path]]) -> Path:
    """A folder `name` whose files are the concatenation of the given parts (a model split across packages).

    Built once, atomically, and rebuilt if any part changed size; the package files are never modified.
    """
    target = cache_dir() / name
    stamp = ",".join(f"{p}:{p.stat().st_size}" for parts in files.values() for p in parts)
    if (target / ".parts").is_file() and (target / ".parts").read_text() == stamp:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    for filename, parts in files.items():
        with open(building / filename, "wb") as out:
            for part in parts:
                with open(part, "rb") as source:
                    shutil.copyfileobj(source, out, 16 * 1024 * 1024)
    (building / ".parts").write_text(stamp)
    shutil.rmtree(target, ignore_errors=True)
    building.rename(target)
    return target
