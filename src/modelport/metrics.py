"""Prometheus metrics: requests and latencies (counted by the HTTP face), tokens and model loads and unloads
(by the service), and the slots, queues and memory of loaded models (read when scraped)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

REQUESTS = Counter("modelport_requests_total", "HTTP requests answered", ["route", "method", "status"])
LATENCY = Histogram(
    "modelport_request_seconds",
    "Time to the end of the response (a stream's last byte)",
    ["route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
LOADS = Histogram(
    "modelport_model_load_seconds",
    "Time a model took to load",
    ["model"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
UNLOADS = Counter("modelport_model_unloads_total", "Models unloaded", ["model", "reason"])  # idle, memory
TOKENS = Counter("modelport_tokens_total", "Tokens processed", ["model", "kind"])  # kind: prompt, completion
# Per project (operators create projects, so the label's values stay few).
PROJECT_REQUESTS = Counter(
    "modelport_project_requests_total", "Model requests per project", ["project", "model"]
)
PROJECT_TOKENS = Counter(
    "modelport_project_tokens_total", "Tokens per project", ["project", "model", "kind"]
)  # kind: input, cached, output


class SlotCollector(Collector):
    """Active slots and queue depth of every loaded model, read from the model manager at each scrape."""

    def __init__(self) -> None:
        self.sources: list[Callable[[], Iterable[Any]]] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active = GaugeMetricFamily("modelport_slots_active", "Calls holding a model slot", labels=["model"])
        total = GaugeMetricFamily("modelport_slots_total", "Slots of a model", labels=["model"])
        waiting = GaugeMetricFamily("modelport_queue_depth", "Calls waiting for a slot", labels=["model"])
        memory = GaugeMetricFamily(
            "modelport_model_memory_bytes",
            "Memory a loaded model took (RSS its load added)",
            labels=["model"],
        )
        loaded = 0
        for source in self.sources:
            for model in source():
                loaded += 1
                active.add_metric([model.spec.id], model.slots.active)
                total.add_metric([model.spec.id], model.slots.total)
                waiting.add_metric([model.spec.id], model.slots.waiting)
                memory.add_metric([model.spec.id], model.memory)
        yield from (active, total, waiting, memory)
        yield GaugeMetricFamily("modelport_models_loaded", "Models loaded now", value=loaded)


SLOTS = SlotCollector()
REGISTRY.register(SLOTS)


@dataclass
class Tally:
    """What one request used, gathered where it is known (the generation's usage, a transcription's
    seconds) for the project's usage records and token limits."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0


_TALLY: ContextVar[Tally | None] = ContextVar("modelport_tally", default=None)


class Tallied:
    """Within the block, what is counted is added to `tally` too. A class rather than a generator's context
    manager: a stream enters it for every item it reads, and this costs a fraction of that."""

    __slots__ = ("tally", "token")

    def __init__(self, tally: Tally) -> None:
        self.tally = tally

    def __enter__(self) -> None:
        self.token = _TALLY.set(self.tally)

    def __exit__(self, *_: object) -> None:
        _TALLY.reset(self.token)


def count_tokens(model: str, usage: dict[str, Any]) -> None:
    """Add a response's usage to the token counters (and to the request's tally)."""
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    TOKENS.labels(model, "prompt").inc(prompt)
    TOKENS.labels(model, "completion").inc(completion)
    tally = _TALLY.get()
    if tally is not None:
        tally.input_tokens += prompt
        tally.output_tokens += completion
        tally.cached_tokens += int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)


def count_seconds(seconds: float) -> None:
    """Add seconds of audio heard to the request's tally."""
    tally = _TALLY.get()
    if tally is not None:
        tally.seconds += seconds


ENGINE_BUILD = Gauge(
    "modelport_engine_build_info",
    "The llama.cpp build this process runs (1): built for this CPU or PyPI's portable one, and its features",
    ["engine", "build", "version", "features"],
)

# Speculative decoding, by GGUF file: accepted over drafted is what drafting pays.
DRAFTED = Counter(
    "modelport_drafted_tokens_total", "Tokens llama.cpp drafted (from n-grams or a draft model)", ["gguf"]
)
DRAFTS_ACCEPTED = Counter(
    "modelport_draft_accepted_tokens_total", "Drafted tokens the model's verification accepted", ["gguf"]
)

# The conversation cache (llama.cpp): how each turn it placed began, and the turns it wrote to files.
CONVERSATION_TURNS = Counter(
    "modelport_conversation_turns_total",
    "Turns placed by the conversation cache, by how each began: restored (from a saved turn's file), resumed "
    "(in the slot its conversation's last turn rests in), shared (in the slot another conversation's last "
    "turn rests in, from what their prompts share), fresh (nothing of it kept), left (to llama.cpp)",
    ["gguf", "start"],
)
CONVERSATION_SAVES = Counter(
    "modelport_conversation_saves_total", "Turns the conversation cache saved to files", ["gguf"]
)
CONVERSATION_ERASES = Counter(
    "modelport_conversation_erases_total",
    "Slots the conversation cache emptied through llama.cpp's loop (a call between its decoding steps)",
    ["gguf"],
)

UPSTREAM_REQUESTS = Counter(
    "modelport_upstream_requests_total",
    "Requests sent to upstream replicas, by the status they answered (or the error)",
    ["upstream", "status"],
)
UPSTREAM_ERRORS = Counter(
    "modelport_upstream_errors_total", "Failures that took an upstream replica out", ["upstream"]
)
UPSTREAM_FIRST_BYTE = Histogram(
    "modelport_upstream_first_byte_seconds",
    "Time until an upstream replica began to answer (a stream's first event)",
    ["upstream"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)


class UpstreamCollector(Collector):
    """Requests in flight and health of every upstream replica, by pool, read at each scrape."""

    def __init__(self) -> None:
        self.sources: list[Callable[[], Iterable[Any]]] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["pool", "upstream"]  # pool: the models.toml entry (two may share an upstream)
        in_flight = GaugeMetricFamily(
            "modelport_upstream_in_flight", "Requests in flight on an upstream replica", labels=labels
        )
        up = GaugeMetricFamily("modelport_upstream_up", "1 if an upstream replica is healthy", labels=labels)
        for source in self.sources:
            for pool in source():
                for replica in pool.replicas:
                    in_flight.add_metric([pool.name, replica.label], replica.in_flight)
                    up.add_metric([pool.name, replica.label], 1 if replica.up else 0)
        yield from (in_flight, up)


UPSTREAMS = UpstreamCollector()
REGISTRY.register(UPSTREAMS)

GC_PAUSES = Histogram(
    "modelport_gc_pause_seconds",
    "Passes of Python's cyclic garbage collector, by generation: every thread, the event loop's too, waits",
    ["generation"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
_gc_began = 0.0


def _time_gc(phase: str, info: dict[str, int]) -> None:
    global _gc_began
    if phase == "start":
        _gc_began = time.perf_counter()
    else:
        GC_PAUSES.labels(str(info["generation"])).observe(time.perf_counter() - _gc_began)


def watch_gc() -> None:
    """Time every pass of the garbage collector from now on (`modelport_gc_pause_seconds`): a request slow
    with nothing slow in its own path waited for one."""
    if _time_gc not in gc.callbacks:
        gc.callbacks.append(_time_gc)
