"""Import xllamacpp with its OpenMP runtime set to keep spinning at barriers when several llama.cpp
instances share the process.

xllamacpp's llama.cpp runs its threads through libgomp, which spins ~300000 iterations at a barrier before
it sleeps, but only 100 once the process holds more OpenMP threads than CPUs. A second multi-threaded
instance always makes it so (a second GGUF model, or the instance that scores prompts), and then each of
the hundreds of barriers per token puts the threads to sleep and wakes them: measured on 2 cores, SmolLM2
decoded 27 tok/s beside an idle second instance against 87 alone. `OMP_WAIT_POLICY=ACTIVE` raises that
short spin to 1000 iterations (87-97 tok/s with two instances), and `GOMP_SPINCOUNT` keeps the usual one at
libgomp's default (ACTIVE alone spins for minutes after each step, so an idle server would keep its CPUs
busy). libgomp reads them once, when it loads; a user's own setting of either is left alone.

PyPI's wheel is built for AVX2; on a CPU with AVX-512 the loader says once how to build it for this CPU.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Any

_SPIN = {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "300000"}
log = logging.getLogger("modelport.llamacpp")


def load() -> Any:
    """The xllamacpp module (it has no type stubs)."""
    ours = {} if any(name in os.environ for name in _SPIN) else _SPIN
    os.environ.update(ours)
    try:
        import xllamacpp
    finally:  # only libgomp needs them: processes this one starts get the user's environment
        for name in ours:
            os.environ.pop(name, None)
    _suggest_native_build(xllamacpp)
    return xllamacpp


@functools.cache
def _suggest_native_build(xllamacpp: Any) -> None:
    if "AVX512 = 1" in xllamacpp.get_system_info() or "avx512f" not in _cpu_flags():
        return
    log.info(
        "llama.cpp here is built for AVX2 and this CPU has AVX-512: scripts/build-llamacpp builds it for "
        "this CPU (decode at ~2k tokens of context 1.24x faster on a 2-core AMD EPYC)"
    )


def _cpu_flags() -> set[str]:
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux
        return set()
    line = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())
