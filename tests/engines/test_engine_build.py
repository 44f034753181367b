"""llama.cpp built for this CPU: which build a process runs, where a build stands, and `modelport serve`
building one in the background and ending it with itself. (The compile itself takes minutes: it is
measured in docs/benchmarks.md, not here.)"""

from __future__ import annotations

import functools
import io
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelport.engine_build import background, compiling, patches
from modelport.engines.llamacpp import cpu_builds, launch
from modelport.engines.llamacpp.launch import default_gguf
from tests.support.live import free_port

WHICH = """
from modelport.engines.llamacpp import xllamacpp_loader
build = xllamacpp_loader.running()
print(build.native, build.path)
"""
SPECULATION = """
from modelport.engines.llamacpp import launch
print(launch.default_speculative())
"""


@pytest.fixture
def engines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MODELPORT_ENGINE_DIR", str(tmp_path))
    monkeypatch.setenv(cpu_builds.VARIABLE, "cached")
    return tmp_path


def fake_build(place: Path, source_edits: tuple[str, ...] = ()) -> Path:
    """A complete build folder whose xllamacpp is the wheel's own files (linked), as a build would be."""
    import importlib.util

    spec = importlib.util.find_spec("xllamacpp")
    assert spec is not None
    assert spec.origin is not None
    (place / "site").mkdir(parents=True)
    (place / "site" / "xllamacpp").symlink_to(Path(spec.origin).parent)
    (place / "engine.json").write_text(json.dumps({"features": "AVX2", "source_edits": list(source_edits)}))
    return place / "site"


def said(script: str, env: dict[str, str] | None = None) -> str:
    """What `script` prints in a process of its own (which imports xllamacpp afresh)."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return done.stdout.strip()


def which(env: dict[str, str] | None = None) -> tuple[bool, str]:
    native, path = said(WHICH, env).split()
    return native == "True", path


@pytest.mark.slow  # five Python processes, each importing the engine
def test_a_process_runs_this_cpus_build_when_there_is_one_and_only_for_this_cpu(engines: Path) -> None:
    version = cpu_builds.wheel_version()
    assert version is not None
    assert which() == (False, which()[1])  # none yet: the wheel

    other = fake_build(engines / cpu_builds.key(version).replace(cpu_builds.key(version)[-12:], "0" * 12))
    assert not which()[0], f"a build for another CPU ({other}) was run here"
    older = fake_build(engines / cpu_builds.key(version).replace(f"-r{cpu_builds.RECIPE}-", "-r1-"))
    assert not which()[0], f"a build of an older recipe ({older}) was run here"

    site = fake_build(engines / cpu_builds.key(version))
    native, path = which()
    assert native
    assert path == str(site / "xllamacpp")
    assert cpu_builds.state().state == "built"
    assert which({cpu_builds.VARIABLE: "portable"})[0] is False


COMPILER = pytest.mark.skipif(
    shutil.which("c++") is None, reason="a build needs a C++ compiler: apt-get install build-essential"
)


def test_without_a_compiler_nothing_is_built_and_the_state_says_why(
    engines: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(engines))  # no c++ there
    monkeypatch.setenv(cpu_builds.VARIABLE, "auto")
    now = cpu_builds.state()
    assert now.state == "unbuildable"
    assert "no C++ compiler" in now.detail
    assert not background.should_build()
    with pytest.raises(RuntimeError, match="no C\\+\\+ compiler"):
        compiling.build()


@COMPILER
def test_where_a_build_stands(engines: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    place = cpu_builds.folder()
    assert place is not None
    assert cpu_builds.state().state == "none"
    assert not background.should_build(), "the cached mode started a build"
    monkeypatch.setenv(cpu_builds.VARIABLE, "auto")
    assert background.should_build()

    place.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, "
         "fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", str(place / "build.lock")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        assert cpu_builds.state().state == "building"
        assert not background.should_build(), "a second build was started beside one under way"
    finally:
        holder.kill()
        holder.wait()

    (place / "failed.json").write_text(json.dumps({"reason": "no space left on device"}))
    now = cpu_builds.state()
    assert now.state == "failed"
    assert "no space left on device" in now.detail
    assert not background.should_build(), "a build that failed an hour ago was tried again at once"
    day_ago = time.time() - background.RETRY_AFTER - 60
    os.utime(place / "failed.json", (day_ago, day_ago))
    assert background.should_build()

    monkeypatch.setenv(cpu_builds.VARIABLE, "sometimes")
    with pytest.raises(ValueError, match="MODELPORT_LLAMACPP_BUILD must be one of auto, cached, portable"):
        cpu_builds.mode()


def builders(engines: Path) -> Iterator[int]:
    """Processes that run with this test's engine folder (the build and the compilers under it)."""
    for entry in Path("/proc").iterdir():
        try:
            environ = (entry / "environ").read_bytes()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and f"MODELPORT_ENGINE_DIR={engines}".encode() in environ:
            yield int(entry.name)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds its processes in /proc")
@pytest.mark.slow  # a server and a compiler of its own
@COMPILER
@pytest.mark.parametrize(
    "ending",
    [
        signal.SIGTERM,  # how systemd and docker stop a server
        signal.SIGINT,  # Ctrl+C; and SIGKILL, where none of the server's own code runs
        signal.SIGKILL,
    ],
)
def test_serve_builds_in_the_background_and_ends_the_build_with_itself(engines: Path, ending: int) -> None:
    port = free_port()
    env = {**os.environ, cpu_builds.VARIABLE: "auto", "MODELPORT_ENGINE_DIR": str(engines)}
    server = subprocess.Popen(
        [sys.executable, "-m", "modelport.cli", "serve", "--lazy", "--no-defaults", "--port", str(port),
         "--model", f"chat=llamacpp:{default_gguf()}"],
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert server.stderr is not None
    said = [server.stderr.readline() for _ in range(2)]
    try:
        assert any("building llama.cpp for this CPU in the background" in line for line in said), said
        deadline = time.monotonic() + 30
        while cpu_builds.state().state != "building" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert cpu_builds.state().state == "building"
        build = [pid for pid in builders(engines) if pid != server.pid]
        assert build, "no build process"
        policy = os.sched_getscheduler(build[0])
        assert policy == os.SCHED_IDLE, f"the build runs at scheduling policy {policy}, not idle"
    finally:
        server.send_signal(ending)
        server.wait(30)
    # A process's memory (and so its environment) goes before its files (and so its lock) as it exits.
    deadline = time.monotonic() + 15
    while (list(builders(engines)) or cpu_builds.state().state == "building") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not list(builders(engines)), "the build went on after its server ended"
    assert cpu_builds.state().state == "none"


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86's instruction sets")
def test_the_build_asks_ggml_for_each_instruction_set_this_cpu_lists_amx_with_its_edit() -> None:
    listed = set(cpu_builds.cpu_flags().split())
    asked = compiling.instruction_sets()
    assert asked[0] == "-DGGML_NATIVE=OFF"  # -march=native decoded slower than the sets named one by one
    assert ("-DGGML_AVX2=ON" in asked) == ("avx2" in listed)
    assert ("-DGGML_AVX512=ON" in asked) == {"avx512f", "avx512bw", "avx512vl"}.issubset(listed)
    assert ("-DGGML_AVX512_VNNI=ON" in asked) == ("avx512_vnni" in listed)
    assert ("-DGGML_AMX_INT8=ON" in asked) == {"amx_tile", "amx_int8", "avx512_vnni"}.issubset(listed)
    assert patches.AMX_TILES_CONFIGURED in patches.EDITS  # the build that asks for AMX carries its edit
    # every set said either way: ggml turns some on by default without GGML_NATIVE
    assert {option.split("=")[0] for option in asked[1:]} == {f"-D{o}" for o in compiling.X86_SETS}


@functools.cache
def source_archive() -> tuple[str, bytes]:
    """The installed xllamacpp's source, fetched from the package index as the build fetches it: the
    folder its files are under, and the archive."""
    version = cpu_builds.wheel_version()
    return f"xllamacpp-{version}/", compiling._sdist("xllamacpp", f"{version}")


def unedited(into: Path, edits: tuple[patches.SourceEdit, ...]) -> None:
    """The files `edits` change, as the installed xllamacpp's source has them, written under `into` at
    their paths in that source."""
    top, sdist = source_archive()
    with tarfile.open(fileobj=io.BytesIO(sdist)) as archive:
        for edit in edits:
            member = archive.extractfile(top + edit.path)
            assert member is not None, edit.path
            (into / edit.path).parent.mkdir(parents=True, exist_ok=True)
            (into / edit.path).write_bytes(member.read())


TILES = """#include <immintrin.h>
#include <cstdint>
#include <sys/syscall.h>
#include <unistd.h>
%s
int main() {
    if (syscall(SYS_arch_prctl, 0x1023, 18)) return 3;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA: refused
    ggml_tile_config_init();
    _tile_zero(4);  // a tile ggml's kernels configure for its results
    _tile_release();
    return 0;
}
"""


@pytest.mark.slow
@pytest.mark.skipif(
    not {"amx_tile", "amx_int8"}.issubset(cpu_builds.cpu_flags().split()) or not shutil.which("c++"),
    reason="a CPU with AMX and a C++ compiler",
)
def test_ggml_s_tiles_configured_as_the_edited_source_configures_them_run(tmp_path: Path) -> None:
    """ggml's own tile configuration, taken from the source a build compiles and edited as the build edits
    it, compiled as ggml is (-O3) and run: a tile instruction after it runs. Without the edit GCC 12 drops the
    configuration's rows and columns, and the same program dies of SIGILL."""
    edit = patches.AMX_TILES_CONFIGURED
    unedited(tmp_path, (edit,))
    patches.apply(tmp_path, (edit,))
    source = (tmp_path / edit.path).read_text()
    start = source.index("struct tile_config_t")
    end = source.index("\n}\n", source.index("inline void ggml_tile_config_init")) + 3
    (tmp_path / "tiles.cpp").write_text(TILES % source[start:end])
    compiler = ["c++", "-O3", "-mamx-tile", "-mamx-int8", "-std=gnu++17", "-o", str(tmp_path / "tiles")]
    subprocess.run([*compiler, str(tmp_path / "tiles.cpp")], check=True)
    ran = subprocess.run([str(tmp_path / "tiles")], check=False)
    if ran.returncode == 3:
        pytest.skip("this kernel does not grant a process AMX's tile state")
    assert ran.returncode == 0, f"the tile instruction faulted (exit status {ran.returncode})"


@pytest.mark.slow  # the build's check loads the default model in a process of its own
@COMPILER
def test_a_build_whose_amx_kernels_fault_is_made_again_without_them(
    engines: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled: list[bool] = []

    def compile_with(
        version: str, place: Path, jobs: int, say: object, amx: bool = True
    ) -> tuple[str, list[str]]:
        """The compiler's part, made up; the check that follows is the build's own."""
        compiled.append(amx)
        shutil.rmtree(place / "site", ignore_errors=True)
        if amx:  # a llama.cpp that runs an instruction this machine will not
            (place / "site" / "xllamacpp").mkdir(parents=True)
            (place / "site" / "xllamacpp" / "__init__.py").write_text(
                "import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n"
            )
            return compiling._check(place / "site"), []
        return compiling._check(fake_build(place)), []

    monkeypatch.setattr(compiling, "_compile", compile_with)
    monkeypatch.setattr(
        compiling, "instruction_sets", lambda amx=True: [f"-DGGML_AMX_INT8={'ON' if amx else 'OFF'}"]
    )
    said: list[str] = []
    site = compiling.build(say=said.append)
    assert compiled == [True, False]
    again = [line for line in said if "without AMX" in line]
    assert len(again) == 1, said
    assert f"died of signal {int(signal.SIGILL)}" in again[0]
    assert json.loads((site.parent / "engine.json").read_text())["features"]
    assert not (site.parent / "failed.json").exists()


@pytest.mark.slow  # four Python processes, each importing the engine
def test_speculation_is_on_by_default_only_in_a_build_that_carries_the_edit_that_makes_it_safe(
    engines: Path,
) -> None:
    version = cpu_builds.wheel_version()
    assert version is not None
    assert said(SPECULATION) == "none"  # PyPI's wheel: its ngram-map-k drafting can abort the process
    place = engines / cpu_builds.key(version)
    fake_build(place)
    assert said(SPECULATION) == "none"  # a build made without the edit
    shutil.rmtree(place)
    fake_build(place, (cpu_builds.NGRAM_MAP_RESYNC,))
    assert said(SPECULATION) == launch.SPECULATIVE == "ngram-map-k"
    assert said(SPECULATION, {cpu_builds.VARIABLE: "portable"}) == "none"


NGRAM_DRAFT = """void draft() {
    if (map.idx_last_check > cur_len) {
        // Should not happen because of common_ngram_map_begin().
        GGML_ABORT("%s: map.idx_last_check > cur_len: %zu > %zu", __func__, map.idx_last_check, cur_len);
    }
}
"""


def test_a_source_edit_is_made_once_and_one_that_does_not_fit_fails_the_build_naming_it(
    tmp_path: Path,
) -> None:
    edit = patches.RESYNC_NGRAM_MAP
    file = tmp_path / edit.path
    file.parent.mkdir(parents=True)
    file.write_text(NGRAM_DRAFT)
    assert patches.apply(tmp_path, (edit,)) == [cpu_builds.NGRAM_MAP_RESYNC]
    edited = file.read_text()
    assert "GGML_ABORT" not in edited
    assert "common_ngram_map_begin(map, {});" in edited
    patches.apply(tmp_path, (edit,))  # a build that goes on finds it made
    assert file.read_text() == edited
    file.write_text(NGRAM_DRAFT.replace("cur_len) {", "cur_len + 1) {", 1))  # a version that moved
    with pytest.raises(
        RuntimeError, match=f"source patch '{cpu_builds.NGRAM_MAP_RESYNC}'.*common/ngram-map.cpp"
    ):
        patches.apply(tmp_path, (edit,))


@pytest.mark.slow
def test_each_source_edit_fits_the_installed_xllamacpp(tmp_path: Path) -> None:
    """Against the source a build compiles (fetched from the package index as the build fetches it): an
    xllamacpp release that moved the text an edit replaces fails here, not on a user's machine."""
    unedited(tmp_path, patches.EDITS)
    assert patches.apply(tmp_path) == [edit.name for edit in patches.EDITS]


CELLS = r"""#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
typedef uint16_t ggml_fp16_t;
struct ggml_tensor { void * data; int64_t ne[4]; size_t nb[4]; };
%s
// As ggml's kernels tell a hidden cell: its mask value, converted from FP16, is -inf.
static bool hidden(ggml_fp16_t value) {
    const uint32_t sign = (uint32_t) (value & 0x8000) << 16, exponent = (value >> 10) & 0x1f;
    const uint32_t mantissa = value & 0x3ff;
    if (exponent == 0) {
        return false;  // zero or subnormal: finite
    }
    const uint32_t bits = sign | (exponent == 0x1f ? 0xff : exponent + 112) << 23 | mantissa << 13;
    float converted;
    memcpy(&converted, &bits, sizeof(converted));
    return converted == -INFINITY;
}
int main() {
    std::mt19937 random(7);
    const ggml_fp16_t kinds[] = {0xFC00, 0x0000, 0x8000, 0xBC00, 0x7C00, 0xFE00, 0xFC01};
    for (int trial = 0; trial < 20000; trial++) {
        const int n = 1 + random() % 200, rows = 1 + random() % 5;
        const int open_one_in = 1 + random() % 12;  // how many hidden cells per open one, about
        std::vector<ggml_fp16_t> mask(n * rows);
        for (auto & value : mask) value = random() % open_one_in ? 0xFC00 : kinds[random() % 7];
        const int64_t start = random() % n, end = start + random() % (n - start + 1);
        std::vector<int64_t> expected, visited;
        for (int64_t ic = start; ic < end; ++ic) if (!hidden(mask[ic])) expected.push_back(ic);
        for (int64_t ic = start; ic < end; ++ic) {  // as the edited loop walks
            ic = ggml_fa_first_open_cell(mask.data(), ic, end);
            if (ic == end) break;
            visited.push_back(ic);
        }
        if (visited != expected) { printf("row %d: other cells\n", trial); return 1; }
        ggml_tensor tensor = {mask.data(), {n, rows, 1, 1}, {2, (size_t) n * 2, (size_t) n * rows * 2, 0}};
        const int cells = (int) (end - start);
        bool all = true;
        for (int tq = 0; tq < rows; tq++)
            for (int tk = 0; tk < cells; tk++) all &= hidden(mask[tq * n + start + tk]);
        if (ggml_fa_tile_hidden(&tensor, 0, rows, 0, 0, start, cells) != all) {
            printf("tile %d\n", trial);
            return 1;
        }
    }
    printf("ok\n");
    return 0;
}
"""


@pytest.mark.slow  # the source fetched from the package index
@COMPILER
def test_flash_attention_computes_the_cells_it_computed_before_passing_hidden_ones_by_their_bits(
    tmp_path: Path,
) -> None:
    """ggml's helpers as the edited source has them, compiled as ggml is (-O3) and given random mask rows
    (open cells among hidden ones, and values that are not -inf whatever their bits look like): the cells
    the edited loop computes are those the kernel's own test (a value converted to -inf is hidden)
    computes, in order, and a tile is passed whole exactly when every cell of it is hidden."""
    edit = patches.MASKED_CELLS_PASSED_BY_BITS
    unedited(tmp_path, (edit,))
    patches.apply(tmp_path, (edit,))
    source = (tmp_path / edit.path).read_text()
    start = source.index("// modelport: the first cell")
    helpers = source[start : source.index("static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(")]
    (tmp_path / "cells.cpp").write_text(CELLS.replace("%s", helpers))
    program = tmp_path / "cells"
    compiler = ["c++", "-O3", "-std=gnu++17", "-o", str(program)]
    subprocess.run([*compiler, str(tmp_path / "cells.cpp")], check=True)
    ran = subprocess.run([str(program)], capture_output=True, text=True, check=False)
    assert (ran.returncode, ran.stdout) == (0, "ok\n")


GGML = "thirdparty/llama.cpp/ggml/"
# FP16 to FP32 bit by bit, as ggml's table holds them, for the compiled checks below.
HALF_TO_FLOAT = r"""static float half_to_float(uint16_t h) {
    const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    float value = exponent == 0 ? mantissa / 16777216.0f : INFINITY;
    if (exponent != 0 && exponent != 0x1f) {
        const uint32_t bits = (exponent + 112) << 23 | mantissa << 13;
        memcpy(&value, &bits, sizeof(value));
    }
    return h & 0x8000 ? -value : value;
}
"""
OTHER_BACKEND = re.compile(r"src/ggml-(?!cpu/)[^/]+/")
PRODUCTS = (
    r"""#include "ggml-cpu-impl.h"
#include "ggml-quants.h"
#include "quants.h"
#include "simd-mappings.h"
#include "llamafile/sgemm.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
// What ggml's other files give the two compiled here.
extern "C" {
float ggml_table_f32_f16[1 << 16];
float ggml_table_f32_e8m0_half[1 << 8];
float ggml_table_f32_ue4m3[1 << 8];
void ggml_barrier(struct ggml_threadpool *) {}
void ggml_threadpool_chunk_set(struct ggml_threadpool *, int) {}
int ggml_threadpool_chunk_add(struct ggml_threadpool *, int) { return 0; }
void ggml_abort(const char *, int, const char *, ...) { abort(); }
void ggml_log_internal(enum ggml_log_level, const char *, ...) {}
void quantize_row_q8_K_ref(const float *, block_q8_K *, int64_t) { abort(); }
}
"""
    + HALF_TO_FLOAT
    + r"""int main() {
    for (uint32_t h = 0; h < (1u << 16); h++) ggml_table_f32_f16[h] = half_to_float((uint16_t) h);
    std::mt19937 random(7);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    // weight rows, token columns, blocks of 32 along the dimension they share: tiles whole and cut
    const int shapes[][3] = {{1, 2, 1}, {3, 3, 2}, {13, 5, 3}, {64, 8, 18}, {192, 25, 18}, {576, 7, 48},
                             {37, 130, 5}};
    for (const auto & shape : shapes) {
        const int rows = shape[0], columns = shape[1], blocks = shape[2];
        std::vector<block_q4_1> weights(rows * blocks);
        std::vector<block_q8_1> tokens(columns * blocks);
        for (auto & w : weights) {
            w.d = GGML_CPU_FP32_TO_FP16(0.001f + 0.1f * unit(random));
            w.m = GGML_CPU_FP32_TO_FP16(unit(random) - 0.5f);
            for (auto & q : w.qs) q = (uint8_t) random();
        }
        for (auto & t : tokens) {
            const float d = 0.001f + 0.05f * unit(random);
            int sum = 0;
            for (auto & q : t.qs) sum += q = (int8_t) (random() % 255 - 127);
            t.d = GGML_CPU_FP32_TO_FP16(d);
            t.s = GGML_CPU_FP32_TO_FP16(d * sum);
        }
        std::vector<float> batch(rows * columns, NAN);
        for (int ith = 0; ith < 2; ith++) {  // two threads' shares, one after the other
            ggml_compute_params params = {};
            params.ith = ith;
            params.nth = 2;
            if (!llamafile_sgemm(&params, rows, columns, blocks, weights.data(), blocks, tokens.data(),
                                 blocks, batch.data(), rows, GGML_TYPE_Q4_1, GGML_TYPE_Q8_1, GGML_TYPE_F32)) {
                printf("declined\n");
                return 0;
            }
        }
        for (int j = 0; j < columns; j++) {
            for (int i = 0; i < rows; i++) {
                float alone;  // as ggml computes a token's product alone
                ggml_vec_dot_q4_1_q8_1(blocks * 32, &alone, 0, &weights[i * blocks], 0, &tokens[j * blocks],
                                       0, 1);
                if (memcmp(&alone, &batch[j * rows + i], sizeof(alone)) != 0) {
                    printf("%d x %d x %d: row %d, column %d: %.9g, alone %.9g\n", rows, columns, blocks, i, j,
                           batch[j * rows + i], alone);
                    return 1;
                }
            }
        }
    }
    printf("ok\n");
    return 0;
}
"""
)


@pytest.mark.slow  # the source fetched from the package index, two of ggml's files compiled
@COMPILER
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="an x86 kernel")
def test_q4_1_weights_times_a_batch_of_tokens_are_the_bits_of_each_token_times_them_alone(
    tmp_path: Path,
) -> None:
    """The tiled Q4_1 products the edit adds to llamafile's kernels, compiled from the edited source as
    ggml is (-O3, this CPU's instructions), against ggml's own dot product of one weight row and one token
    (`ggml_vec_dot_q4_1_q8_1`, from the same source): random blocks, tiles whole and cut at the edges, each
    thread's share, every product the same bits: the edit changes how fast, not what, ggml computes."""
    top, sdist = source_archive()
    with tarfile.open(fileobj=io.BytesIO(sdist)) as archive:
        wanted = [  # ggml's headers and its CPU backend's sources, not the other backends'
            member
            for member in archive.getmembers()
            if member.isfile()
            and member.name.startswith(top + GGML)
            and member.name.endswith((".h", ".c", ".cpp"))
            and not OTHER_BACKEND.match(member.name[len(top + GGML) :])
        ]
        archive.extractall(tmp_path, members=wanted, filter="data")
    source = tmp_path / top
    patches.apply(source, (patches.Q4_1_TILED_PRODUCTS,))
    ggml = source / GGML
    (tmp_path / "products.cpp").write_text(PRODUCTS)
    flags = ["-O3", "-march=native", *(f"-I{ggml / folder}" for folder in ("src", "src/ggml-cpu", "include"))]
    objects = [tmp_path / "sgemm.o", tmp_path / "quants.o"]
    subprocess.run(
        [
            "c++",
            *flags,
            "-std=gnu++17",
            "-c",
            str(ggml / "src/ggml-cpu/llamafile/sgemm.cpp"),
            "-o",
            str(objects[0]),
        ],
        check=True,
    )
    subprocess.run(
        [
            "cc",
            *flags,
            "-std=gnu11",
            "-c",
            str(ggml / "src/ggml-cpu/arch/x86/quants.c"),
            "-o",
            str(objects[1]),
        ],
        check=True,
    )
    program = tmp_path / "products"
    subprocess.run(
        [
            "c++",
            *flags,
            "-std=gnu++17",
            str(tmp_path / "products.cpp"),
            *map(str, objects),
            "-o",
            str(program),
        ],
        check=True,
    )
    ran = subprocess.run([str(program)], capture_output=True, text=True, check=False)
    if ran.stdout == "declined\n":
        pytest.skip("this CPU has no AVX2, FMA or F16C: ggml's own products run, as before the edit")
    assert (ran.returncode, ran.stdout) == (0, "ok\n")


ATTENTION = (
    r"""#include <immintrin.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
typedef uint16_t ggml_fp16_t;
struct ggml_tensor { void * data; int64_t ne[4]; size_t nb[4]; };
"""
    + HALF_TO_FLOAT
    + r"""#define GGML_CPU_FP16_TO_FP32(x) half_to_float(x)
%s
int main() {
    std::mt19937 random(7);
    const ggml_fp16_t others[] = {0x8000, 0xFC00, 0x0001, 0x3C00, 0xBC00};  // -0, -inf, tiny, 1, -1
    for (int trial = 0; trial < 20000; trial++) {
        const int n = 1 + random() % 200, rows = 1 + random() % 5;
        const int set_one_in = 1 + random() % 400;
        std::vector<ggml_fp16_t> mask(n * rows);
        for (auto & value : mask) value = random() % set_one_in ? 0x0000 : others[random() % 5];
        const int64_t start = random() % n, cells = random() % (n - start + 1);
        ggml_tensor tensor = {mask.data(), {n, rows, 1, 1}, {2, (size_t) n * 2, (size_t) n * rows * 2, 0}};
        bool all = true;
        for (int tq = 0; tq < rows; tq++)
            for (int tk = 0; tk < cells; tk++) all &= mask[tq * n + start + tk] == 0x0000;
        if (ggml_fa_tile_open(&tensor, 0, rows, 0, 0, start, (int) cells) != all) {
            printf("mask %d\n", trial);
            return 1;
        }
    }
    const int64_t widths[] = {64, 128, 40, 36};  // K's dimensions: eight by eight, and not
    for (int trial = 0; trial < 2000; trial++) {
        const int64_t dims = widths[trial % 4];
        const int cells = 1 + random() % 64;
        const size_t stride = dims * 2 + 2 * (random() % 9);
        std::vector<char> k(64 * stride);
        for (int tk = 0; tk < 64; tk++)
            for (int64_t dk = 0; dk < dims; dk++) {
                ggml_fp16_t value;
                do value = (ggml_fp16_t) random(); while (((value >> 10) & 0x1f) == 0x1f);  // finite
                memcpy(&k[tk * stride + dk * 2], &value, 2);
            }
        std::vector<float> packed(dims * 64, -7.0f);
        ggml_fa_pack_k_f16(packed.data(), 64, k.data(), stride, cells, dims);
        for (int64_t dk = 0; dk < dims; dk++)
            for (int tk = 0; tk < 64; tk++) {
                ggml_fp16_t value;
                memcpy(&value, &k[tk * stride + dk * 2], 2);
                const float expected = tk < cells ? half_to_float(value) : -7.0f;
                if (memcmp(&packed[dk * 64 + tk], &expected, 4) != 0) {
                    printf("k %d: cell %d, dimension %d\n", trial, tk, (int) dk);
                    return 1;
                }
            }
    }
    printf("ok\n");
    return 0;
}
"""
)


@pytest.mark.slow  # the source fetched from the package index
@COMPILER
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 intrinsics")
def test_a_prompts_attention_passes_masks_that_add_nothing_and_converts_k_as_before(tmp_path: Path) -> None:
    """The edited tiled flash attention's two helpers, compiled from the edited source as ggml is (-O3,
    this CPU's instructions): a tile is passed without its mask exactly when every value of it is +0 (not
    -0, -inf or any other), and K's rows come out converted and transposed bit for bit as ggml converts
    each value, for whole and cut tiles, dimensions eight by eight or not, rows padded apart."""
    edits = (patches.MASKED_CELLS_PASSED_BY_BITS, patches.ATTENTION_TILES)
    unedited(tmp_path, edits)
    patches.apply(tmp_path, edits)
    source = (tmp_path / patches.ATTENTION_TILES.path).read_text()
    start = source.index("// modelport: whether every cell of a tile (`rows` mask rows from `first`, `cells`")
    helpers = source[start : source.index("static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(")]
    (tmp_path / "attention.cpp").write_text(ATTENTION.replace("%s", helpers))
    program = tmp_path / "attention"
    compiler = ["c++", "-O3", "-march=native", "-std=gnu++17", "-o", str(program)]
    subprocess.run([*compiler, str(tmp_path / "attention.cpp")], check=True)
    ran = subprocess.run([str(program)], capture_output=True, text=True, check=False)
    assert (ran.returncode, ran.stdout) == (0, "ok\n")
