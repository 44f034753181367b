"""Bind llama.cpp's threads one to a CPU while other processes keep this process's CPUs busy, and free
them when the machine is calm again.

llama.cpp's threads spin at every barrier. Unbound, a busy neighbour makes the scheduler move them about, and
each barrier waits for whichever was descheduled: on 2 cores, decode beside one busy process fell to
0.3x its idle rate; bound one to a CPU, it held 0.5x (`bench.contention`). Bound always, 8 streams decoding
together on an idle machine lost 10-30% in some runs and nothing in others; bound only while the machine
is busy, idle decoding is the unbound engine's by construction. So one watcher thread per process samples,
every `PERIOD`, the CPU time of the CPUs the engines may use and of this process, and binds the engines'
threads while other processes use at least `BUSY` CPUs.

Threads are bound from outside (`sched_setaffinity` on each thread id), not through llama.cpp's own
`strict_cpu`, which binds them again at every step and so could not be undone. A thread that a bound
thread starts inherits its one CPU (llama.cpp starts its decode workers at the first decode, which may come
after the binding): each such thread is taken as its engine's and given a CPU of its own at once. Left on
its creator's CPU, the two spun at every barrier for each other's time slice: 3 s a token on 2 cores
beside one busy process (`bench.soak --busy 1`), 300 times slower than unbound.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

BUSY = 0.5  # CPUs that other processes use, on average over a period, for the threads to be bound
CALM = 0.25  # ... and below which they are freed again
PERIOD = 0.5  # seconds between samples
# While the machine is calm and nothing is bound, the engines' own threads are looked at only every so many
# samples (to forget the ended ones): reading each thread's CPU time every half second was most of the
# watcher's own CPU (6 ms a second, an idle server's largest thread after its event loop).
CALM_LOOKS = 10
_TASKS = Path("/proc/self/task")


def one_per_cpu(n_threads: int) -> list[int]:
    """The CPUs this process may use, if there are `n_threads` of them (and more than one) and threads can
    be bound on this system; else none. Fewer threads than CPUs stay unbound: several such engines (in
    processes or replicas of their own) would all be bound to the same first CPUs."""
    if not _TASKS.is_dir():  # not Linux
        return []
    allowed = sorted(os.sched_getaffinity(0))
    return allowed if n_threads == len(allowed) > 1 else []


@contextlib.contextmanager
def bound_while_busy(n_threads: int) -> Iterator[None]:
    """Watch the native threads (not Python's) that an engine of `n_threads` starts within the block:
    bound while other processes are busy, until they have all ended. Nothing when `one_per_cpu` says the
    threads cannot be bound, or when the block fails."""
    allowed = one_per_cpu(n_threads)
    if not allowed:
        yield
        return
    before = _native_threads()
    yield
    _watcher.add(_EngineThreads(_native_threads() - before, allowed))


@dataclass
class _EngineThreads:
    threads: set[int]  # ids, alive or not
    allowed: list[int]  # the CPUs it may use
    cpu: dict[int, int] = field(default_factory=dict)  # each thread's CPU time at the last sample (ticks)
    bound: dict[int, int] = field(default_factory=dict)  # thread -> its CPU, while bound

    def active(self) -> list[int]:
        """The threads that ran since the last call (llama.cpp's workers; its HTTP listener's sleep), less
        those that ended: the busiest first."""
        used: dict[int, int] = {}
        for thread in sorted(self.threads):
            cpu = _thread_cpu(thread)
            if cpu < 0:
                self.threads.discard(thread)
                self.bound.pop(thread, None)
            elif cpu > self.cpu.get(thread, cpu):
                used[thread] = cpu - self.cpu[thread]
            self.cpu[thread] = cpu
        return sorted(used, key=lambda thread: -used[thread])

    def bind(self, active: list[int]) -> None:
        """Each active thread on a CPU of its own, the busiest first (`active`'s order): where it is
        unless another is there already, else the least loaded. A bound thread that has gone idle holds no
        CPU: binding round robin over the CPUs idle threads left free once put llama.cpp's two decode
        threads on one CPU, beside the HTTP listener alone on the other. Nor does a thread that ran only a
        little: the listener, bound beside the main decode thread while a turn was saved, kept its CPU when
        the next prompt's worker thread woke, which then shared the main thread's and spun for its time
        slice at every barrier (a prompt read 1.5-3× slower until the next look)."""
        load = dict.fromkeys(self.allowed, 0)
        for thread in active:
            cpu = self.bound.get(thread)
            if cpu is None or load.get(cpu) != 0:
                cpu = min(self.allowed, key=lambda c: load[c])
            load[cpu] += 1
            if self.bound.get(thread) == cpu:
                continue
            with contextlib.suppress(OSError):  # ended meanwhile
                os.sched_setaffinity(thread, {cpu})
                self.bound[thread] = cpu

    def free(self) -> None:
        for thread in self.bound:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(thread, self.allowed)
        self.bound.clear()


class _Watcher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: list[_EngineThreads] = []
        self._thread: threading.Thread | None = None
        self._known: set[int] = set()  # native threads seen at the last look

    def add(self, engine: _EngineThreads) -> None:
        engine.active()  # their CPU time so far
        with self._lock:
            self._engines.append(engine)
            self._known |= _native_threads()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="modelport-binding", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        busy = False
        last = _Sample.now(self._engines[0].allowed)
        looks = 0
        while True:
            time.sleep(PERIOD)
            looks += 1
            with self._lock:
                self._engines = [engine for engine in self._engines if engine.threads]
                if not self._engines:
                    self._thread = None
                    return
                now = _Sample.now(self._engines[0].allowed)
                others = now.others_since(last)
                last = now
                busy = others >= BUSY or (busy and others >= CALM)
                if not (busy or any(engine.bound for engine in self._engines) or looks % CALM_LOOKS == 0):
                    continue
                self._adopt()
                for engine in self._engines:
                    active = engine.active()
                    if busy:
                        engine.bind(active)
                    elif engine.bound:
                        engine.free()

    def _adopt(self) -> None:
        """Native threads started since the last look on the one CPU a bound engine thread has (they
        inherited it from their creator): that engine's, each moved to a CPU of its own now."""
        native = _native_threads()
        for thread in native - self._known:
            with contextlib.suppress(OSError):  # ended meanwhile
                cpus = os.sched_getaffinity(thread)
                owner = next(
                    (e for e in self._engines if len(cpus) == 1 and cpus <= set(e.bound.values())), None
                )
                if owner is not None:
                    owner.threads.add(thread)
                    owner.cpu[thread] = _thread_cpu(thread)
                    owner.bind([*owner.bound, thread])
        self._known = native


@dataclass(frozen=True)
class _Sample:
    wall: float
    machine: float  # CPU-seconds the CPUs spent busy, all processes together
    own: float  # CPU-seconds of this process

    @classmethod
    def now(cls, cpus: list[int]) -> _Sample:
        tick = os.sysconf("SC_CLK_TCK")
        wanted = {f"cpu{cpu}" for cpu in cpus}
        machine = 0
        for line in Path("/proc/stat").read_text().splitlines():
            fields = line.split()
            if fields and fields[0] in wanted:
                user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
                machine += user + nice + system + irq + softirq
        return cls(time.monotonic(), machine / tick, _cpu_ticks(Path("/proc/self/stat")) / tick)

    def others_since(self, last: _Sample) -> float:
        """CPUs that other processes used since `last`, on average."""
        used = (self.machine - last.machine) - (self.own - last.own)
        return max(0.0, used) / max(self.wall - last.wall, 1e-3)


def _thread_cpu(thread: int) -> int:
    """Clock ticks that `thread` of this process has run; -1 once it has ended."""
    try:
        return _cpu_ticks(_TASKS / str(thread) / "stat")
    except (OSError, ValueError):
        return -1


def _cpu_ticks(stat: Path) -> int:
    """User and system time from a /proc `stat` file (after the command name, which may hold spaces)."""
    utime, stime = stat.read_text().rsplit(")", 1)[1].split()[11:13]
    return int(utime) + int(stime)


def _native_threads() -> set[int]:
    python = {thread.native_id for thread in threading.enumerate()}
    return {int(task.name) for task in _TASKS.iterdir()} - python


_watcher = _Watcher()
