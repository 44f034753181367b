"""How many CPUs the engines may really use: the process's affinity and its cgroup's quota, not the host's
count (`os.cpu_count()` says 64 inside a container given 2 CPUs, and 64 spinning threads on 2 CPUs stall
each other at every barrier)."""

from __future__ import annotations

import math
import os
from pathlib import Path

_CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "<quota> <period>" or "max <period>"


def usable() -> int:
    """The CPUs this process may run on, bounded by its cgroup's CPU quota (rounded up), at least 1."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        count = os.cpu_count() or 1
    return max(1, min(count, _quota() or count))


def _quota() -> int | None:
    try:
        quota, period = _CGROUP_CPU_MAX.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return math.ceil(int(quota) / int(period))
