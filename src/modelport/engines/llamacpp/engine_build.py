"""llama.cpp built for the CPU it runs on: where such a build lives, whether it fits this machine, which
build a process runs, and making one.

PyPI's xllamacpp wheel is a portable build (AVX2, GCC 10) so that it runs on any x86-64 Linux; the same
llama.cpp compiled here with `GGML_NATIVE` (every instruction this CPU has, this machine's compiler)
decodes faster (docs/benchmarks.md). A build takes minutes (about 7 on 2 cores), so `modelport serve`
does not wait for one: it serves on the wheel at once, builds beside it at idle priority (`SCHED_IDLE`:
the build gets only CPU time nothing else wants) and paused while the server answers, and its next start
runs the build.

A build lives outside the virtual environment, in `<cache>/engine/<key>/`: the key names the xllamacpp
version, the machine and a hash of the CPU's feature flags, so a cache copied to another CPU is not used
there (an instruction that CPU lacks would kill the process). Its `site/` goes first on `sys.path` before
xllamacpp is imported. It counts only once `engine.json` is written, after a process of its own has
loaded it and generated with it. Its sources stay in `work/` until then, so a build stopped with its
server goes on from where it was at the next start. Sources come from the package index only (xllamacpp's
sdist; llguidance, the grammar engine tools and JSON outputs use, linked from its wheel rather than built
with Cargo, which would fetch from GitHub and crates.io).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
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
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from modelport.engines.packaged import cache_dir

VARIABLE = "MODELPORT_LLAMACPP_BUILD"
# auto: run this CPU's build if there is one, else run the wheel and build one in the background;
# cached: run this CPU's build if there is one, never start one (the tests); portable: run the wheel.
MODES = ("auto", "cached", "portable")
LLGUIDANCE = "1.9.1"  # the version xllamacpp's llama.cpp is written against
RETRY_AFTER = 24 * 3600  # an automatic build that failed is not tried again before this (seconds)
# The machines llama.cpp's CMake knows native flags for; elsewhere the wheel (or its absence) stays.
MACHINES = ("x86_64", "amd64", "aarch64", "arm64")


_NOT_INSTRUCTIONS = ("OPENMP", "REPACK", "LLAMAFILE")  # what llama.cpp's system info lists beside the CPU's


@dataclass(frozen=True)
class EngineBuild:
    """The llama.cpp a process runs."""

    version: str  # xllamacpp's
    native: bool  # built on this machine for its CPU
    path: str  # the xllamacpp package imported
    features: str  # what llama.cpp says it was built with (its system info, CPU part)

    def describe(self) -> str:
        """One line for the log, `modelport ps` and `/metrics`."""
        built = "built for this CPU" if self.native else "PyPI's portable build"
        return f"llama.cpp of xllamacpp {self.version}, {built} ({self.features})"


def mode() -> str:
    """`MODELPORT_LLAMACPP_BUILD` (see `MODES`)."""
    value = os.environ.get(VARIABLE, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"{VARIABLE} must be one of {', '.join(MODES)}, not {value!r}")
    return value


def home() -> Path:
    """Where builds live: `MODELPORT_ENGINE_DIR`, else `engine/` in modelport's cache folder."""
    given = os.environ.get("MODELPORT_ENGINE_DIR")
    return Path(given) if given else cache_dir() / "engine"


def wheel_version() -> str | None:
    """The xllamacpp version installed beside modelport (what a build compiles)."""
    try:
        return metadata.version("xllamacpp")
    except metadata.PackageNotFoundError:
        return None


def cpu_flags() -> str:
    """The CPU's feature flags as the kernel lists them (x86 `flags`, Arm `Features`)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return " ".join(sorted(value.split()))
    return platform.processor()


def key(version: str) -> str:
    """The folder name of a build of this xllamacpp version for this machine and CPU."""
    fingerprint = hashlib.sha256(f"{platform.machine()} {cpu_flags()}".encode()).hexdigest()[:12]
    return f"xllamacpp-{version}-{platform.machine().lower()}-{fingerprint}"


def folder(version: str | None = None) -> Path | None:
    """This machine's build folder (complete or not) for the installed xllamacpp."""
    version = version or wheel_version()
    return home() / key(version) if version else None


def ready() -> Path | None:
    """The `site/` of a complete build for this CPU, if there is one."""
    place = folder()
    return place / "site" if place is not None and (place / "engine.json").is_file() else None


def choose() -> Path | None:
    """Put this CPU's build first on `sys.path` when there is one and the mode allows (before xllamacpp
    is imported); the folder chosen, or None for the wheel."""
    if mode() == "portable" or "xllamacpp" in sys.modules:
        return None
    site = ready()
    if site is not None and str(site) not in sys.path:
        sys.path.insert(0, str(site))
    return site


def running(module: Any) -> EngineBuild:
    """What the imported xllamacpp `module` is."""
    path = os.path.dirname(os.path.abspath(module.__file__))
    info = str(module.get_system_info())
    flags = [part.split("=") for part in info.partition(":")[2].split("|") if part.count("=") == 1]
    features = " ".join(
        name.strip() for name, on in flags if on.strip() == "1" and name.strip() not in _NOT_INSTRUCTIONS
    )
    native = path.startswith(os.path.abspath(home()) + os.sep) or not _portable_wheel()
    return EngineBuild(wheel_version() or "?", native, path, features or info.strip())


def _portable_wheel() -> bool:
    """Whether the xllamacpp installed beside modelport is PyPI's wheel (`manylinux`) rather than one
    built on this machine (`linux_x86_64`, as `pip install --no-binary` makes)."""
    try:
        return "manylinux" in (metadata.distribution("xllamacpp").read_text("WHEEL") or "")
    except metadata.PackageNotFoundError:  # imported from a source tree
        return False


@dataclass(frozen=True)
class BuildState:
    """Where this machine's build stands: `built`, `building`, `failed`, `unbuildable` or `none`."""

    state: str
    detail: str
    place: Path | None


def state() -> BuildState:
    """Whether this CPU has its build, one is under way, the last one failed, or none can be made."""
    place = folder()
    if place is None:
        return BuildState("unbuildable", "xllamacpp is not installed", None)
    if (place / "engine.json").is_file():
        return BuildState("built", json.loads((place / "engine.json").read_text()).get("features", ""), place)
    if _locked(place):
        return BuildState("building", f"log: {place / 'build.log'}", place)
    failed = place / "failed.json"
    if failed.is_file():
        reason = json.loads(failed.read_text())
        return BuildState("failed", f"{reason['reason']} (log: {place / 'build.log'})", place)
    missing = _missing_tool()
    if missing:
        return BuildState("unbuildable", missing, place)
    return BuildState("none", "not built yet", place)


def _missing_tool() -> str | None:
    if platform.machine().lower() not in MACHINES:
        return f"llama.cpp has no native build here ({platform.machine()})"
    if not shutil.which("c++"):
        return "no C++ compiler (Debian: apt-get install build-essential)"
    return None


def should_build() -> bool:
    """Whether `modelport serve` starts a build in the background: the mode is `auto`, this CPU has no
    build, none is under way, one can be made, and none failed in the last day."""
    if mode() != "auto":
        return False
    now = state()
    if now.state == "failed" and now.place is not None:
        return time.time() - (now.place / "failed.json").stat().st_mtime > RETRY_AFTER
    return now.state == "none"


def start_background() -> subprocess.Popen[bytes] | None:
    """`modelport engine build --idle` in a session of its own (stopped with `stop`), its output in the
    build's log; None when there is nothing to build."""
    if not should_build():
        return None
    place = folder()
    assert place is not None
    place.mkdir(parents=True, exist_ok=True)
    with (place / "build.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "modelport.cli", "engine", "build", "--idle"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE,  # `pause` and `go` (see `follow_server`); closed, the build ends
            start_new_session=True,
        )


def order(child: subprocess.Popen[bytes], word: str) -> bool:
    """Tell a background build to `pause` or `go`; False once it has ended."""
    try:
        assert child.stdin is not None
        child.stdin.write(f"{word}\n".encode())
        child.stdin.flush()
    except (BrokenPipeError, ValueError):
        return False
    return True


def stop(child: subprocess.Popen[bytes], wait: float = 10) -> None:
    """End a background build and every compiler it runs (the next one goes on from its objects)."""
    if child.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            child.stdin.close()
    try:
        child.wait(wait)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)


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
    missing = _missing_tool()
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
            features = _compile(version, place, jobs, say)
        except (OSError, subprocess.CalledProcessError, RuntimeError) as error:
            reason = _reason(error)
            _write(place / "failed.json", {"reason": reason, "at": time.time()})
            raise RuntimeError(reason) from error
        seconds = round(time.monotonic() - started)
        _write(
            place / "engine.json",
            {"xllamacpp": version, "features": features, "seconds": seconds, "jobs": jobs, "at": time.time()},
        )
        shutil.rmtree(place / "work", ignore_errors=True)
        say(f"llama.cpp built for this CPU in {seconds // 60} min {seconds % 60} s: {features}")
        return place / "site"


def _reason(error: BaseException) -> str:
    if isinstance(error, subprocess.CalledProcessError):
        return f"{' '.join(map(str, error.cmd[:4]))} … failed with exit status {error.returncode}"
    return str(error)


def _compile(version: str, place: Path, jobs: int, say: Any) -> str:
    """The steps of a build; the features the built llama.cpp reports."""
    work, site = place / "work", place / "site"
    python = sys.executable
    source = work / f"xllamacpp-{version}"
    if not (source / "setup.py").is_file():
        say(f"fetching xllamacpp {version}'s source")
        _unpack(_sdist("xllamacpp", version), work, f"xllamacpp-{version}/")
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
    # GGML_NATIVE is xllamacpp's default for a source build; BoringSSL only serves llama.cpp's downloads.
    env["CMAKE_ARGS"] = (
        "-DLLAMA_BUILD_BORINGSSL=OFF -DLLAMA_LLGUIDANCE=OFF "
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
    return _check(site)


# Loads the build in a process of its own and decodes a few tokens greedily: an instruction the CPU
# lacks or a symbol left unresolved kills that process, not the server that would have imported it.
_CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
import xllamacpp
from modelport.engines.llamacpp import engine_build, launch
try:
    launch.default_gguf()
except FileNotFoundError:  # the default model is not installed: loading is the check
    pass
else:
    server = launch.start_server(n_parallel=1, n_ctx=512, speculative="none", pin=False)
    ask = {"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}
    assert server.handle_completions(ask)["choices"][0]["text"].strip()
print(json.dumps(engine_build.running(xllamacpp).features))
"""


def _check(site: Path) -> str:
    env = dict(os.environ, **{VARIABLE: "portable"})  # the check imports from `site` itself
    done = _STEPS.run([sys.executable, "-c", _CHECK, str(site)], env=env, capture=True)
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
    with (place / "build.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _locked(place: Path) -> bool:
    """Whether a build holds the lock now."""
    lock = place / "build.lock"
    if not lock.is_file():
        return False
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False
