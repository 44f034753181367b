"""What this machine gives the process: the CPUs it may really use, the memory it may take, and the memory
it holds now (and how it is given back), and the authorities it trusts. Engines size their thread pools from
the first; the model manager budgets with the memory; every TLS connection the server opens checks its
peer against the trust store."""

from __future__ import annotations

import ctypes
import functools
import gc
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

_CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "<quota> <period>" or "max <period>"
_CGROUP_MEMORY_MAX = Path("/sys/fs/cgroup/memory.max")


def usable_cpus() -> int:
    """The CPUs this process may run on, bounded by its cgroup's CPU quota (rounded up), at least 1.

    Not the host's count: `os.cpu_count()` says 64 inside a container given 2 CPUs, and 64 spinning threads
    on 2 CPUs stall each other at every barrier."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        count = os.cpu_count() or 1
    return max(1, min(count, _cpu_quota() or count))


def _cpu_quota() -> int | None:
    try:
        quota, period = _CGROUP_CPU_MAX.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return math.ceil(int(quota) / int(period))


def total_memory() -> int:
    """The RAM this process may use: the machine's, or its cgroup's limit when that is lower."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        limit = _CGROUP_MEMORY_MAX.read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def process_rss() -> int:
    """Bytes of RAM this process holds now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def process_age() -> float | None:
    """Seconds since this process started (None where /proc does not say): what a user has waited, its
    imports included."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            started = int(stat.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
            return float(uptime.read().split()[0]) - started
    except (OSError, ValueError, IndexError):
        return None


def give_back_memory() -> None:
    """Return the C heap's free pages to the system (glibc's `malloc_trim`; nothing elsewhere). A model
    freed leaves its memory in the allocator's arenas, held for the process's next allocations: without
    this an unloaded model's hundreds of MiB stay in the process's RSS."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return
    libc.malloc_trim(0)


class _Frozen:
    froze = False  # whether `keep_out_of_collections` froze the heap (and so may unfreeze it)


def keep_out_of_collections() -> None:
    """What the process holds now (a server's start-up: its modules, models and tables, which live as long
    as it does) kept out of the collector's full passes, each of which walked all of it on the event loop's
    thread (0.3-0.6 s on 2 cores with the default models; every request waited). Where the program froze
    its heap itself (a test run, an application), its freeze is left as it made it."""
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
        _Frozen.froze = True


def back_into_collections() -> None:
    """What `keep_out_of_collections` froze, back within the collector's reach: a model loaded at start-up
    and unloaded since would otherwise never be freed. Another's freeze is not undone."""
    if _Frozen.froze:
        gc.unfreeze()
        _Frozen.froze = False


def one_blas_thread() -> None:
    """numpy's BLAS held to one thread, in a process whose engines own the cores (a server, a replica):
    OpenBLAS's pool spins for about a tenth of a second after each call it splits, on the cores llama.cpp
    is decoding on (prompts scored for `echo` back to back took 131 ms each over HTTP with its default pool,
    98 with one thread). What numpy does there (a scored prompt's logits, a search's dot products) is small;
    an application's own process, where the in-process client runs, keeps its pool."""
    from threadpoolctl import threadpool_limits  # here: only those processes pay for its import

    threadpool_limits(limits=1, user_api="blas")


def trust_store() -> ssl.SSLContext:
    """The TLS context of every connection the server opens (a URL a client gave, an MCP server, the identity
    provider's keys): certificates checked against the machine's trust store (OpenSSL's default, or what
    `SSL_CERT_FILE` and `SSL_CERT_DIR` name), and certifi's bundle where the default's file holds no
    certificate. One for the process: loading a store is 10-35 ms of CPU, which a context made for each
    connection (an image by URL, an MCP server's session) added to its request."""
    return _trust_store(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _trust_store(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    import ssl  # not with the commands that open no connection

    context = ssl.create_default_context()  # OpenSSL reads the two variables itself
    if not context.cert_store_stats()["x509_ca"] and cafile is None and capath is None:
        import certifi

        context.load_verify_locations(cafile=certifi.where())
    return context
