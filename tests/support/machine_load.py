"""Wall-clock bounds in tests that hold on a machine doing other work: a bound written for an idle
machine, times how much busier this one is now (the README's test command runs on developers' machines,
where a load of 8 on 2 cores was seen)."""

from __future__ import annotations

import os

from modelport import machine


def slack() -> float:
    """How many times longer than on an idle machine a wall-clock bound may take now: the machine's load
    (its one-minute average) per usable CPU, at least 1. This suite's own workers (a CPU each) keep it
    near 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average here
        return 1.0
    return max(1.0, load / machine.usable_cpus())
