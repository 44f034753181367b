"""How much memory a model will take, estimated from its files before it loads; what the process holds."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def process_rss() -> int:
    """Bytes of RAM this process holds now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def total_memory() -> int:
    """The RAM this process may use: the machine's, or its cgroup's limit when that is lower."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def files_size(paths: Iterable[Path]) -> int:
    """Bytes on disk of these files, and of everything inside these folders."""
    size = 0
    for path in paths:
        if path.is_dir():
            size += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            size += path.stat().st_size
    return size


def estimate(engine_module: str, options: dict[str, Any]) -> int:
    """Bytes a model will take once loaded: the engine's own estimate (`memory(**options)`) when it has one,
    else the size of the files its options name."""
    module = importlib.import_module(engine_module)
    own = getattr(module, "memory", None)
    if own is not None:
        return int(own(**options))
    paths = [Path(v).expanduser() for v in options.values() if isinstance(v, str) and v and "://" not in v]
    return files_size(p for p in paths if p.exists())
