"""Requests and tokens per minute, per project and per key (and per model within either), and the models
each may use. Each limit is a bucket that refills continuously (a limit of 60 a minute gives one back
every second, as OpenAI's do), so a client that waits `retry-after` gets in.

The buckets are this replica's: replicas sharing a database each allow the full limit. Counting in the
database would cost a write per request on every request; set the limits per replica (the limit ÷ the
number of replicas) where that matters."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from modelport.context import RequestContext
from modelport.errors import ModelNotFoundError, RateLimitError

_MINUTE = 60.0


@dataclass
class _Bucket:
    capacity: float
    level: float
    at: float

    def refill(self, capacity: float, now: float) -> None:
        self.capacity = capacity
        self.level = min(capacity, self.level + (now - self.at) * capacity / _MINUTE)
        self.at = now

    def seconds_until(self, level: float) -> float:
        """Until the bucket holds `level` again."""
        return max(0.0, (level - self.level) * _MINUTE / self.capacity)


@dataclass(frozen=True)
class _Limit:
    key: tuple[str, ...]
    what: str  # requests, tokens
    capacity: int
    scope: str  # said in the 429's message


class Quotas:
    """The buckets of every project, key and model this replica has served."""

    def __init__(self) -> None:
        self._buckets: dict[tuple[str, ...], _Bucket] = {}

    def admit(self, request: RequestContext, model: str) -> None:
        """Let one request for `model` in, or refuse it: a 404 for a model the project or key may not use,
        a 429 when a limit is used up. The tightest limits go into the answer's headers either way."""
        limits = self._limits(request, model)
        if not limits:
            return
        now = time.monotonic()
        for limit in limits:
            self._bucket(limit, now)
        shown: dict[str, str] = {}
        for what, needed in (("requests", 1.0), ("tokens", 1.0)):
            own = [limit for limit in limits if limit.what == what]
            if not own:
                continue
            tightest = min(own, key=lambda limit: self._buckets[limit.key].level / limit.capacity)
            bucket = self._buckets[tightest.key]
            remaining = max(0, math.floor(bucket.level - (1 if what == "requests" else 0)))
            shown.update(
                {
                    f"x-ratelimit-limit-{what}": str(tightest.capacity),
                    f"x-ratelimit-remaining-{what}": str(remaining),
                    f"x-ratelimit-reset-{what}": _duration(bucket.seconds_until(bucket.capacity)),
                }
            )
            if bucket.level < needed:
                wait = bucket.seconds_until(needed)
                shown[f"x-ratelimit-remaining-{what}"] = "0"
                raise RateLimitError(
                    f"Rate limit reached for {model} in {tightest.scope} on {what} per minute: "
                    f"Limit {tightest.capacity}. Please try again in {_duration(wait)}.",
                    retry_after=wait,
                    limits=shown,
                )
        for limit in limits:
            if limit.what == "requests":
                self._buckets[limit.key].level -= 1
        request.headers.update(shown)

    @staticmethod
    def allows(request: RequestContext, model: str) -> bool:
        """Whether the caller's project and key may use `model` (lists show only those)."""
        return all(
            not limits.get("models") or model in limits["models"] for limits in request.limits if limits
        )

    def spend(self, request: RequestContext, model: str, tokens: int) -> None:
        """Take a finished request's tokens from its token buckets (which may go below zero: the next
        request then waits until they refill)."""
        if tokens <= 0:
            return
        now = time.monotonic()
        for limit in self._limits(request, model):
            if limit.what == "tokens":
                self._bucket(limit, now).level -= tokens

    def _bucket(self, limit: _Limit, now: float) -> _Bucket:
        bucket = self._buckets.get(limit.key)
        if bucket is None:
            bucket = self._buckets[limit.key] = _Bucket(limit.capacity, limit.capacity, now)
        bucket.refill(limit.capacity, now)
        return bucket

    def _limits(self, request: RequestContext, model: str) -> list[_Limit]:
        if not self.allows(request, model):
            raise ModelNotFoundError(model)
        found: list[_Limit] = []
        scopes = [("project", request.project), ("key", request.key_id or "")]
        for (kind, name), limits in zip(scopes, request.limits, strict=False):
            if not limits:
                continue
            per_model: dict[str, Any] = (limits.get("per_model") or {}).get(model) or {}
            for what, field in (("requests", "rpm"), ("tokens", "tpm")):
                if limits.get(field):
                    found.append(_Limit((kind, name, "*", what), what, int(limits[field]), f"{kind} {name}"))
                if per_model.get(field):
                    found.append(
                        _Limit((kind, name, model, what), what, int(per_model[field]), f"{kind} {name}")
                    )
        return found


def _duration(seconds: float) -> str:
    """OpenAI's form of a reset time: `120ms`, `1s`, `6m0s`."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    minutes, rest = divmod(math.ceil(seconds), 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"
