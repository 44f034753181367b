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

PyPI's wheel is a portable build (AVX2, GCC 10); on an x86-64 CPU the loader says once how to build it for
this one, which decodes faster on both CPUs measured, with AVX-512 and without.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
from importlib import metadata
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
    _suggest_native_build()
    return xllamacpp


@functools.cache
def _suggest_native_build() -> None:
    if platform.machine() not in ("x86_64", "AMD64") or not portable(_wheel_tags()):
        return
    log.info(
        "llama.cpp here is PyPI's portable build: scripts/build-llamacpp builds it for this CPU (~6-13 min), "
        "which decodes faster (2-core AMD EPYC Zen 3: 8 streams at 1.07x llama-server's own build, against "
        "0.88x; with AVX-512, 1.24x at ~2k tokens of context)"
    )


def portable(wheel_tags: str) -> bool:
    """Whether a wheel's tags (its `WHEEL` file) are those of a build made to run on any Linux (PyPI's,
    repaired for `manylinux`) rather than one built on this machine (`linux_x86_64`)."""
    return "manylinux" in wheel_tags


def _wheel_tags() -> str:
    try:
        return metadata.distribution("xllamacpp").read_text("WHEEL") or ""
    except metadata.PackageNotFoundError:  # imported from a source tree
        return ""
