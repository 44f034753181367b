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

Which llama.cpp it imports: this CPU's own build when there is one (see `cpu_builds`), else PyPI's
portable wheel; the loader says once which.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

from modelport import metrics
from modelport.engines.llamacpp import cpu_builds

_SPIN = {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "300000"}
log = logging.getLogger("modelport.llamacpp")


def load() -> Any:
    """The xllamacpp module (it has no type stubs): this CPU's build when there is one."""
    cpu_builds.choose()
    ours = {} if any(name in os.environ for name in _SPIN) else _SPIN
    os.environ.update(ours)
    try:
        import xllamacpp
    finally:  # only libgomp needs them: processes this one starts get the user's environment
        for name in ours:
            os.environ.pop(name, None)
    _say_which(xllamacpp)
    return xllamacpp


def running() -> cpu_builds.EngineBuild:
    """The llama.cpp this process runs (imported now if it was not)."""
    return _say_which(load())


@functools.cache
def _say_which(module: Any) -> cpu_builds.EngineBuild:
    """What `module` is, said once (the log and the metric) and kept."""
    build = cpu_builds.running(module)
    log.info("engine: %s", build.describe())
    kind = "native" if build.native else "portable"
    metrics.ENGINE_BUILD.labels("llama.cpp", kind, build.version, build.features).set(1)
    if not build.native and cpu_builds.mode() == "auto":
        now = cpu_builds.state()
        if now.state == "building":
            log.info("llama.cpp is being built for this CPU at idle priority; the next start runs it")
        elif now.state == "none":  # an in-process client: only `modelport serve` starts a build
            log.info(
                "llama.cpp is not built for this CPU yet (`modelport engine build`, or `modelport serve`)"
            )
        else:
            log.info("llama.cpp is not built for this CPU: %s", now.detail)
    return build
