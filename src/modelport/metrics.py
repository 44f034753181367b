"""Prometheus metrics: requests and latencies (counted by the HTTP face), tokens (by the service), and the
slots and queues of loaded models (read when scraped)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

REQUESTS = Counter("modelport_requests_total", "HTTP requests answered", ["route", "method", "status"])
LATENCY = Histogram(
    "modelport_request_seconds",
    "Time to the end of the response (a stream's last byte)",
    ["route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
TOKENS = Counter("modelport_tokens_total", "Tokens processed", ["model", "kind"])  # kind: prompt, completion


class SlotCollector(Collector):
    """Active slots and queue depth of every loaded model, read from the model manager at each scrape."""

    def __init__(self) -> None:
        self.sources: list[Callable[[], Iterable[Any]]] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active = GaugeMetricFamily("modelport_slots_active", "Calls holding a model slot", labels=["model"])
        total = GaugeMetricFamily("modelport_slots_total", "Slots of a model", labels=["model"])
        waiting = GaugeMetricFamily("modelport_queue_depth", "Calls waiting for a slot", labels=["model"])
        for source in self.sources:
            for model in source():
                active.add_metric([model.spec.id], model.slots.active)
                total.add_metric([model.spec.id], model.slots.total)
                waiting.add_metric([model.spec.id], model.slots.waiting)
        yield from (active, total, waiting)


SLOTS = SlotCollector()
REGISTRY.register(SLOTS)


def count_tokens(model: str, usage: dict[str, Any]) -> None:
    """Add a response's usage to the token counters."""
    TOKENS.labels(model, "prompt").inc(int(usage.get("prompt_tokens") or 0))
    TOKENS.labels(model, "completion").inc(int(usage.get("completion_tokens") or 0))
