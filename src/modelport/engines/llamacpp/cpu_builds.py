"""Where this machine's llama.cpp builds live, whether one fits this CPU, which build a process runs, and
where this CPU's build stands: what the runtime needs to choose its llama.cpp. Making a build is
`modelport.engine_build`'s, outside the runtime path.

A build lives outside the virtual environment, in `<cache>/engine/<key>/`: the key names the xllamacpp
version, the recipe, the machine and a hash of the CPU's feature flags, so a cache copied to another CPU
is not used there (an instruction that CPU lacks would kill the process). Its `site/` goes first on
`sys.path` before xllamacpp is imported. It counts only once `engine.json` is written, after a process of
its own has loaded it and generated with it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from modelport.engines.packaged import cache_dir

VARIABLE = "MODELPORT_LLAMACPP_BUILD"
# auto: run this CPU's build if there is one, else run the wheel and build one in the background;
# cached: run this CPU's build if there is one, never start one (the tests); portable: run the wheel.
MODES = ("auto", "cached", "portable")
# The machines llama.cpp's CMake knows native flags for; elsewhere the wheel (or its absence) stays.
MACHINES = ("x86_64", "amd64", "aarch64", "arm64")
LOCK = "build.lock"  # held by the build under way (`modelport.engine_build`)
# What a build makes, in the name of its folder: raised whenever `modelport.engine_build` changes what it
# compiles (its flags, its source edits), so that a build made the old way is not run and one is made anew.
RECIPE = 9
# The source edit that stops `ngram-map-k` drafting from aborting the process
# (`modelport.engine_build.patches`): speculation is on by default only in a build that carries it.
NGRAM_MAP_RESYNC = "ngram-map-resync"
# The source edit by which a slot drafts only while few slots generate (`modelport.engine_build.patches`).
DRAFTING_WHILE_FEW = "drafting-while-few-generate"
# The source edit by which a slot emptied or restored through llama.cpp's slot actions starts its n-gram map
# afresh (`modelport.engine_build.patches`).
NGRAM_MAP_WITH_SLOT = "ngram-map-follows-slot"
# The source edit by which a slot whose new prompt drops part of its history (llama.cpp reusing only a prefix
# of what the slot held) starts its n-gram map afresh (`modelport.engine_build.patches`).
NGRAM_MAP_WITH_PROMPT = "ngram-map-follows-prompt"
# The source edit by which ggml's AMX kernels configure their tiles (`modelport.engine_build.patches`).
AMX_TILE_CONFIG = "amx-tile-config"
# The source edit by which ggml's CPU flash attention passes the cells a shared KV cache hides from a sequence
# by their mask's bits (`modelport.engine_build.patches`).
MASKED_CELLS_PASSED = "masked-cells-passed"
# The source edit by which ggml multiplies Q4_1 weights by a batch of tokens a tile at a time
# (`modelport.engine_build.patches`).
Q4_1_TILES = "q4_1-tiles"
# The source edit by which ggml's tiled flash attention (a prompt's) adds no mask that adds nothing and
# converts K eight values at a time (`modelport.engine_build.patches`).
ATTENTION_TILES_UNPACKED = "attention-tiles-unpacked"


_NOT_INSTRUCTIONS = ("OPENMP", "REPACK", "LLAMAFILE")  # what llama.cpp's system info lists beside the CPU's


@dataclass(frozen=True)
class EngineBuild:
    """The llama.cpp a process runs."""

    version: str  # xllamacpp's
    native: bool  # built on this machine for its CPU
    path: str  # the xllamacpp package imported
    features: str  # what llama.cpp says it was built with (its system info, CPU part)
    source_edits: tuple[str, ...] = ()  # the changes this machine's build made to llama.cpp's source

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
    return f"xllamacpp-{version}-r{RECIPE}-{platform.machine().lower()}-{fingerprint}"


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
    ours = path.startswith(os.path.abspath(home()) + os.sep)
    native = ours or not _portable_wheel()
    edits = tuple(_recorded(Path(path).parent.parent).get("source_edits", ())) if ours else ()
    return EngineBuild(wheel_version() or "?", native, path, features or info.strip(), edits)


def _recorded(place: Path) -> dict[str, Any]:
    """A complete build's `engine.json` (empty when there is none)."""
    try:
        recorded: dict[str, Any] = json.loads((place / "engine.json").read_text())
    except (OSError, ValueError):
        return {}
    return recorded


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
        return BuildState("built", _recorded(place).get("features", ""), place)
    if _locked(place):
        return BuildState("building", f"log: {place / 'build.log'}", place)
    failed = place / "failed.json"
    if failed.is_file():
        reason = json.loads(failed.read_text())
        return BuildState("failed", f"{reason['reason']} (log: {place / 'build.log'})", place)
    missing = missing_tool()
    if missing:
        return BuildState("unbuildable", missing, place)
    return BuildState("none", "not built yet", place)


def missing_tool() -> str | None:
    if platform.machine().lower() not in MACHINES:
        return f"llama.cpp has no native build here ({platform.machine()})"
    if not shutil.which("c++"):
        return "no C++ compiler (Debian: apt-get install build-essential)"
    return None


def _locked(place: Path) -> bool:
    """Whether a build holds the lock now."""
    lock = place / LOCK
    if not lock.is_file():
        return False
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False
