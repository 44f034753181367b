"""The reference servers the benchmarks compare against, built once and cached outside the repository.

- `llama-server`: llama.cpp's own server, compiled for this CPU from the llama.cpp that modelport's engine
  is built from (the sources vendored in the installed xllamacpp version's sdist: PyPI is the only source
  this machine can reach) with the instruction sets modelport's build names, and the one source edit of
  modelport's build that is about the kernels, not the server (AMX's tile configuration, without which
  either build dies where it uses AMX), so that a ratio compares the servers and not two llama.cpp versions
  or builds. ~15 minutes on 2 cores.
- llama-cpp-python's server: the same sdist built as a wheel, installed into its own virtual environment
  so its pins never touch modelport's.

`python -m bench.references [--llama-server]` builds both (or llama-server alone); each benchmark calls
`llama_server()` / `llama_cpp_python()` and says clearly when one is absent instead of building it in the
middle of a measurement.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"
CACHE = Path(os.environ.get("MODELPORT_BENCH_CACHE", Path.home() / ".cache" / "modelport" / "bench"))


BUILD = "build-amx"  # named anew whenever the reference is compiled another way (here: AMX and its edit)


def _llama_cpp() -> Path:
    """Where llama.cpp's sources of the installed xllamacpp are kept and built."""
    return CACHE / f"llama.cpp-xllamacpp-{metadata.version('xllamacpp')}"


def llama_server() -> Path | None:
    """The `llama-server` binary: `$LLAMA_SERVER`, the cached build, or one on PATH."""
    for candidate in (
        os.environ.get("LLAMA_SERVER"),
        str(_llama_cpp() / BUILD / "bin" / "llama-server"),
        shutil.which("llama-server"),
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def llama_cpp_python() -> Path | None:
    """The Python interpreter of the virtual environment that has `llama_cpp.server`."""
    python = CACHE / f"llama-cpp-python-{LLAMA_CPP_PYTHON}" / "bin" / "python"
    return python if python.is_file() else None


def _sdist(name: str = "llama-cpp-python", version: str = LLAMA_CPP_PYTHON) -> Path:
    target = CACHE / f"{name.replace('-', '_')}-{version}.tar.gz"
    if not target.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", tmp,
                 f"{name}=={version}"],
                check=True,
            )  # fmt: skip
            shutil.move(next(Path(tmp).glob("*.tar.gz")), target)
    return target


def build_llama_server() -> Path:
    """Compile `llama-server` (CPU, no curl) from xllamacpp's vendored llama.cpp, for the instruction sets
    modelport's own build asks for on this CPU (`engine_build.compiling.instruction_sets`), with its AMX
    edit: the same sources, flags and kernels, so that a ratio compares the servers and not two builds."""
    from modelport.engine_build import patches
    from modelport.engine_build.compiling import instruction_sets

    found = llama_server()
    if found:
        return found
    source = _llama_cpp()
    if not (source / "CMakeLists.txt").is_file():
        archive = _sdist("xllamacpp", metadata.version("xllamacpp"))
        with tarfile.open(archive) as sdist, tempfile.TemporaryDirectory() as tmp:
            sdist.extractall(tmp, filter="data")
            shutil.move(next(Path(tmp).glob("*/thirdparty/llama.cpp")), source)
    kernels = patches.AMX_TILES_CONFIGURED  # its path is inside xllamacpp's source, llama.cpp's folder here
    inside = kernels.path.removeprefix("thirdparty/llama.cpp/")
    patches.apply(source, (dataclasses.replace(kernels, path=inside),))
    build = source / BUILD
    subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
         "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_BORINGSSL=OFF", *instruction_sets()],
        check=True,
    )  # fmt: skip
    subprocess.run(["cmake", "--build", str(build), "--target", "llama-server"], check=True)
    built = llama_server()
    assert built, "the build finished without a llama-server binary"
    return built


def build_llama_cpp_python() -> Path:
    """Build llama-cpp-python[server] from the sdist into its own virtual environment."""
    found = llama_cpp_python()
    if found:
        return found
    venv = CACHE / f"llama-cpp-python-{LLAMA_CPP_PYTHON}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"llama-cpp-python[server] @ file://{_sdist()}"],
        check=True,
        env={
            **os.environ,
            "CMAKE_ARGS": "-DGGML_NATIVE=ON",
            "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count()),
        },
    )
    return python


if __name__ == "__main__":
    print("llama-server:", build_llama_server())
    if "--llama-server" not in sys.argv[1:]:  # llama-cpp-python's build takes as long again
        print("llama-cpp-python:", build_llama_cpp_python())
