"""The build itself: the xllamacpp and llguidance sources from the package index, llama.cpp compiled for
the instruction sets this CPU lists in steps a server can pause, checked in a process of its own, and
written whole or not at all; at idle priority when a server started it, following that server's orders and
ending with it."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from modelport.engine_build import patches
from modelport.engines.llamacpp.cpu_builds import (
    LOCK,
    VARIABLE,
    cpu_flags,
    folder,
    missing_tool,
    wheel_version,
)

LLGUIDANCE = "1.9.1"  # the version xllamacpp's llama.cpp is written against


class _Steps:
    """The build's commands, each in a process group of its own: a server pauses the one under way while it
    answers requests (SIGSTOP and SIGCONT to its group, compilers and all) and ends it with itself, while
    the build's own process keeps listening."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: subprocess.Popen[str] | None = None
        self.paused = False
        self.ended = False

    def run(
        self, command: list[str], env: dict[str, str] | None = None, capture: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run `command` to its end; raise `CalledProcessError` when it fails (unless `capture`)."""
        out = subprocess.PIPE if capture else None
        with self._lock:
            if self.ended:
                raise RuntimeError("the server that started this build has ended")
            child = subprocess.Popen(command, env=env, stdout=out, stderr=out, text=True, process_group=0)
            self._current = child
            if self.paused:
                os.killpg(child.pid, signal.SIGSTOP)
        stdout, stderr = child.communicate()
        with self._lock:
            self._current = None
        if child.returncode and not capture:
            raise subprocess.CalledProcessError(child.returncode, command)
        return subprocess.CompletedProcess(command, child.returncode, stdout, stderr)

    def signal(self, signum: int) -> None:
        """Send `signum` to the command under way and everything it started."""
        with self._lock:
            self.ended = self.ended or signum == signal.SIGKILL
            if self._current is not None and self._current.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._current.pid, signum)


_STEPS = _Steps()


def follow_server() -> None:
    """Take orders from the server that started this build, on standard input: `pause` while it answers
    requests, `go` when it is idle; the input's end (the server ended, however it ended) ends the build,
    compilers and all."""

    def listen() -> None:
        for line in sys.stdin:
            order = line.strip()
            if order in ("pause", "go"):
                _STEPS.paused = order == "pause"
                _STEPS.signal(signal.SIGSTOP if _STEPS.paused else signal.SIGCONT)
        _STEPS.signal(signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=listen, name="server-orders", daemon=True).start()


def idle_priority() -> None:
    """Run this process and all it starts only on CPU time nothing else wants."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or refused: the weakest nice value instead
        os.nice(19)


def build(jobs: int | None = None, say: Any = print) -> Path:
    """Build the installed xllamacpp's llama.cpp for this CPU (if not built already) and return its
    `site/`. Raises `RuntimeError` with the reason when it cannot; another build under way waits."""
    version = wheel_version()
    if version is None:
        raise RuntimeError("xllamacpp is not installed")
    missing = missing_tool()
    if missing:
        raise RuntimeError(missing)
    place = folder(version)
    assert place is not None
    place.mkdir(parents=True, exist_ok=True)
    with _lock(place):
        if (place / "engine.json").is_file():
            return place / "site"
        (place / "failed.json").unlink(missing_ok=True)
        started, jobs = time.monotonic(), jobs or os.cpu_count() or 2
        try:
            try:
                features, edits = _compile(version, place, jobs, say)
            except Faulted as fault:
                if "-DGGML_AMX_INT8=ON" not in instruction_sets():
                    raise
                # AMX's kernels are the one part of a build known to have faulted on a machine that lists
                # AMX (patches.AMX_TILES_CONFIGURED); without them this CPU's build still pays.
                say(f"{fault}: compiling again without AMX")
                features, edits = _compile(version, place, jobs, say, amx=False)
        except (OSError, subprocess.CalledProcessError, RuntimeError) as error:
            reason = _reason(error)
            _write(place / "failed.json", {"reason": reason, "at": time.time()})
            raise RuntimeError(reason) from error
        seconds = round(time.monotonic() - started)
        _write(
            place / "engine.json",
            {
                "xllamacpp": version,
                "features": features,
                "source_edits": edits,
                "seconds": seconds,
                "jobs": jobs,
                "at": time.time(),
            },
        )
        shutil.rmtree(place / "work", ignore_errors=True)
        say(f"llama.cpp built for this CPU in {seconds // 60} min {seconds % 60} s: {features}")
        return place / "site"


def _reason(error: BaseException) -> str:
    if isinstance(error, subprocess.CalledProcessError):
        return f"{' '.join(map(str, error.cmd[:4]))} … failed with exit status {error.returncode}"
    return str(error)


class Faulted(RuntimeError):
    """A build's check died of a signal: the built llama.cpp ran an instruction this machine would not."""


def _compile(version: str, place: Path, jobs: int, say: Any, amx: bool = True) -> tuple[str, list[str]]:
    """The steps of a build (with AMX's kernels where the CPU lists AMX, if `amx`); the features the built
    llama.cpp reports and the source edits it carries."""
    work, site = place / "work", place / "site"
    python = sys.executable
    source = work / f"xllamacpp-{version}"
    if not (source / "setup.py").is_file():
        say(f"fetching xllamacpp {version}'s source")
        _unpack(_sdist("xllamacpp", version), work, f"xllamacpp-{version}/")
    edits = patches.apply(source)  # before any object is compiled, and again on a build that goes on
    include = work / "include"
    if not (include / "llguidance.h").is_file():
        # The wheel exports llguidance's C API but ships no header: take it from the same version's source.
        say(f"fetching llguidance {LLGUIDANCE}")
        _unpack(_sdist("llguidance", LLGUIDANCE), include, f"llguidance-{LLGUIDANCE}/parser/llguidance.h")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "install", "--quiet", "--no-deps", "--upgrade"]
    if not (site / "llguidance").is_dir():
        _STEPS.run([*pip, "--target", str(site), f"llguidance=={LLGUIDANCE}"])
    library = next((site / "llguidance").glob("_lib*.so"), None)
    if library is None:
        raise RuntimeError(f"llguidance {LLGUIDANCE}'s wheel has no _lib shared library")
    env = dict(os.environ, NPROC=str(jobs))
    if not shutil.which("cmake"):  # PyPI's, by its binary: pip's build environment hides the venv's
        _STEPS.run([*pip, "--target", str(work / "tools"), "cmake"])
        env["PATH"] = f"{work / 'tools' / 'cmake' / 'data' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # The extension module leaves Python's symbols to the interpreter that loads it; CMake's test
    # programs, linked with these flags too, are never run.
    env["LDFLAGS"] = f"-Wl,--no-as-needed {library} -Wl,--allow-shlib-undefined"
    # BoringSSL only serves llama.cpp's downloads.
    env["CMAKE_ARGS"] = (
        f"-DLLAMA_BUILD_BORINGSSL=OFF -DLLAMA_LLGUIDANCE=OFF {' '.join(instruction_sets(amx))} "
        f"'-DCMAKE_CXX_FLAGS=-DLLAMA_USE_LLGUIDANCE -I{include}'"
    )
    say(f"compiling llama.cpp for this CPU with {jobs} jobs (logged as it goes)")
    # A folder is built in place: llama.cpp's objects stay in `source` for a build that was stopped.
    wheels = work / "wheel"
    _STEPS.run(
        [python, "-m", "pip", "--disable-pip-version-check", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(wheels), str(source)],
        env=env,
    )  # fmt: skip
    built = next(wheels.glob(f"xllamacpp-{version}-*.whl"), None)
    if built is None:
        raise RuntimeError(f"the build made no xllamacpp {version} wheel")
    _STEPS.run([*pip, "--target", str(site), str(built)])
    return _check(site), edits


# ggml's options for the x86 instruction sets it has kernels for, by the names the kernel lists them under.
# AMX's kernels run only with the source edit that configures their tiles (`patches.AMX_TILES_CONFIGURED`):
# without it they died of SIGILL at the first matrix product. Where the kernel refuses a process the tile
# state, ggml says so and keeps to the other kernels; where they fault all the same, the build is made again
# without them (`build`).
X86_SETS = {
    "GGML_SSE42": ("sse4_2",),
    "GGML_AVX": ("avx",),
    "GGML_AVX2": ("avx2",),
    "GGML_FMA": ("fma",),
    "GGML_F16C": ("f16c",),
    "GGML_BMI2": ("bmi2",),
    "GGML_AVX_VNNI": ("avx_vnni",),
    "GGML_AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "GGML_AVX512_VBMI": ("avx512vbmi",),
    "GGML_AVX512_VNNI": ("avx512_vnni",),
    "GGML_AVX512_BF16": ("avx512_bf16",),
    "GGML_AMX_TILE": ("amx_tile",),
    "GGML_AMX_INT8": ("amx_tile", "amx_int8", "avx512_vnni"),  # ggml's AMX kernels are built on VNNI's
    "GGML_AMX_BF16": ("amx_tile", "amx_bf16"),
}


def instruction_sets(amx: bool = True) -> list[str]:
    """CMake definitions for the instruction sets to build for: on x86, each set ggml has kernels for
    that this CPU lists (AMX's only if `amx`), named one by one (the way ggml's own per-CPU variants are
    built: on a 2-core Intel Xeon VM, `GGML_NATIVE`'s `-march=native` decoded 11–15% slower); elsewhere
    `GGML_NATIVE`, xllamacpp's default for a source build."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ["-DGGML_NATIVE=ON"]
    listed = set(cpu_flags().split())
    # Each set said either way: without GGML_NATIVE, ggml turns AVX, AVX2, FMA, F16C and BMI2 on unless told.
    named = [
        f"-D{option}={'ON' if listed.issuperset(needs) and (amx or 'AMX' not in option) else 'OFF'}"
        for option, needs in X86_SETS.items()
    ]
    return ["-DGGML_NATIVE=OFF", *named]


# Loads the build in a process of its own and decodes a few tokens greedily: an instruction the CPU
# lacks or a symbol left unresolved kills that process, not the server that would have imported it.
_CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
import xllamacpp
from modelport.engines.llamacpp import cpu_builds, launch
try:
    launch.default_gguf()
except FileNotFoundError:  # the default model is not installed: loading is the check
    pass
else:
    server = launch.start_server(n_parallel=1, n_ctx=512, speculative="none", pin=False)
    ask = {"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}
    assert server.handle_completions(ask)["choices"][0]["text"].strip()
print(json.dumps(cpu_builds.running(xllamacpp).features))
"""


def _check(site: Path) -> str:
    env = dict(os.environ, **{VARIABLE: "portable"})  # the check imports from `site` itself
    done = _STEPS.run([sys.executable, "-c", _CHECK, str(site)], env=env, capture=True)
    if done.returncode < 0:
        raise Faulted(f"the build died of signal {-done.returncode} as it generated")
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(
            f"the build did not load and generate (exit status {done.returncode}): {done.stderr[-2000:]}"
        )
    return str(json.loads(done.stdout.strip().splitlines()[-1]))


def _sdist(name: str, version: str) -> bytes:
    """A source distribution from the package index pip uses (`PIP_INDEX_URL`, else PyPI), by the
    index's JSON API (PEP 691): pip itself would prepare the package's metadata, which for llguidance
    needs Cargo."""
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    request = urllib.request.Request(
        f"{index}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        files = json.load(reply)["files"]
    wanted = {f"{name}-{version}.tar.gz", f"{name.replace('-', '_')}-{version}.tar.gz"}
    url = next((f["url"] for f in files if f["filename"] in wanted), None)
    if url is None:
        raise RuntimeError(f"the package index has no source of {name} {version}")
    with urllib.request.urlopen(urllib.parse.urljoin(f"{index}/{name}/", url), timeout=600) as reply:
        data: bytes = reply.read()
    return data


def _unpack(archive: bytes, into: Path, member: str) -> None:
    """Extract `member` (a folder when it ends in `/`) of a `.tar.gz`, without its leading folders."""
    into.mkdir(parents=True, exist_ok=True)
    strip = member.rstrip("/").rsplit("/", 1)[0] + "/" if "/" in member.rstrip("/") else ""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        chosen = [m for m in tar.getmembers() if m.name == member.rstrip("/") or m.name.startswith(member)]
        if not chosen:
            raise RuntimeError(f"{member} is not in the source distribution")
        for entry in chosen:
            entry.name = entry.name[len(strip) :]
        tar.extractall(into, members=chosen, filter="data")


def _write(path: Path, content: dict[str, Any]) -> None:
    """Write a JSON file whole or not at all."""
    part = path.with_suffix(".part")
    part.write_text(json.dumps(content, indent=1))
    part.replace(path)


@contextmanager
def _lock(place: Path) -> Iterator[None]:
    """Hold this build's lock; a second builder waits for the first (then finds its build)."""
    with (place / LOCK).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
