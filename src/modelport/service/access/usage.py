"""Usage per project: each model request's counts, added up in memory per minute and written in batches
(never on the request's path), and read back in the shape of OpenAI's Usage API."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from typing import Any

from modelport import metrics
from modelport.context import RequestContext
from modelport.errors import InvalidRequestError, StoreDisabledError, StoreUnavailableError
from modelport.metrics import Tally
from modelport.store import Store
from modelport.store.usage_rows import COUNTS
from modelport.tasks import stopped

log = logging.getLogger("modelport.usage")

# The Usage API's endpoints and what each result holds (OpenAI's field ← our column).
RESULTS: dict[str, tuple[str, dict[str, str]]] = {
    "completions": (
        "organization.usage.completions.result",
        {
            "input_tokens": "input_tokens",
            "input_cached_tokens": "cached_tokens",
            "output_tokens": "output_tokens",
            "input_audio_tokens": "",
            "output_audio_tokens": "",
            "num_model_requests": "requests",
        },
    ),
    "embeddings": (
        "organization.usage.embeddings.result",
        {"input_tokens": "input_tokens", "num_model_requests": "requests"},
    ),
    "audio_speeches": (
        "organization.usage.audio_speeches.result",
        {"characters": "characters", "num_model_requests": "requests"},
    ),
    "audio_transcriptions": (
        "organization.usage.audio_transcriptions.result",
        {"seconds": "seconds", "num_model_requests": "requests"},
    ),
    "images": (
        "organization.usage.images.result",
        {"images": "images", "num_model_requests": "requests"},
    ),
}
WIDTHS = {"1m": 60, "1h": 3600, "1d": 86400}
_BUCKETS = {"1m": (60, 1440), "1h": (24, 168), "1d": (7, 31)}  # default and most buckets per page


def _rows() -> defaultdict[tuple[int, str, str, str, str], dict[str, float]]:
    """Counts by (minute, project, model, key, kind), each row starting at zero."""
    return defaultdict(lambda: dict.fromkeys(COUNTS, 0))


class Meter:
    """Counts each model request against its project, model and key, per minute."""

    def __init__(self, store: Store | None, flush_seconds: float) -> None:
        self.store = store
        self.flush_seconds = flush_seconds
        self._pending = _rows()
        self._task: asyncio.Task[None] | None = None
        # One write at a time: a read's flush that found nothing pending must still wait for the rows a
        # background flush took a moment before and is writing, or the read misses them.
        self._writing = asyncio.Lock()

    def record(
        self, request: RequestContext, model: str, kind: str, tally: Tally, characters: int = 0
    ) -> None:
        """Add one request's counts (in memory; written within `flush_seconds`)."""
        metrics.PROJECT_REQUESTS.labels(request.project, model).inc()
        for name, count in (
            ("input", tally.input_tokens),
            ("cached", tally.cached_tokens),
            ("output", tally.output_tokens),
        ):
            if count:
                metrics.PROJECT_TOKENS.labels(request.project, model, name).inc(count)
        if self.store is None:
            return
        minute = int(time.time()) // 60 * 60
        row = self._pending[(minute, request.project, model, request.key_id or "", kind)]
        row["requests"] += 1
        row["input_tokens"] += tally.input_tokens
        row["cached_tokens"] += tally.cached_tokens
        row["output_tokens"] += tally.output_tokens
        row["characters"] += characters
        row["seconds"] += tally.seconds
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_soon())

    async def flush(self) -> None:
        """Write what is pending now (also at shutdown, and before usage is read)."""
        async with self._writing:
            await self._write()

    async def _write(self) -> None:
        if self.store is None or not self._pending:
            return
        pending, self._pending = self._pending, _rows()
        rows = [
            {"bucket": b, "project": p, "model": m, "key_id": k, "kind": kind, **counts}
            for (b, p, m, k, kind), counts in pending.items()
        ]
        try:
            await self.store.usage.add(rows)
        except StoreUnavailableError:
            # Kept for the next try rather than lost.
            for key, counts in pending.items():
                for name in COUNTS:
                    self._pending[key][name] += counts[name]
            raise

    async def close(self) -> None:
        """Write what is pending."""
        if self._task is not None:
            await stopped(self._task)
        with contextlib.suppress(StoreUnavailableError):
            await self.flush()

    async def page(
        self,
        kind: str,
        *,
        start_time: int,
        end_time: int | None = None,
        bucket_width: str = "1d",
        project_ids: list[str] | None = None,
        models: list[str] | None = None,
        group_by: list[str] | None = None,
        limit: int | None = None,
        page: str | None = None,
    ) -> dict[str, Any]:
        """`GET /v1/organization/usage/{kind}`: a page of time buckets, each with its results."""
        if self.store is None:
            raise StoreDisabledError("Usage is kept in the store, and this server stores nothing.")
        if kind not in RESULTS:
            raise InvalidRequestError(f"No usage of kind '{kind}'.", param="kind")
        if bucket_width not in WIDTHS:
            raise InvalidRequestError("bucket_width must be 1m, 1h or 1d.", param="bucket_width")
        default, most = _BUCKETS[bucket_width]
        count = default if limit is None else limit
        if not 1 <= count <= most:
            raise InvalidRequestError(
                f"limit must be between 1 and {most} for bucket_width {bucket_width}.", param="limit"
            )
        width = WIDTHS[bucket_width]
        grouped = [g for g in (group_by or []) if g in ("project_id", "model", "api_key_id")]
        if group_by and len(grouped) != len(group_by):
            raise InvalidRequestError("group_by may hold project_id, model and api_key_id.", param="group_by")
        first = int(page) if page and page.isdigit() else start_time
        end = min(end_time or int(time.time()) + 1, first + count * width)
        await self.flush()
        found = await self.store.usage.buckets(
            kind=kind,
            start=first,
            end=end,
            width=width,
            projects=project_ids,
            models=models,
            group_by=grouped,
        )
        object_name, fields = RESULTS[kind]
        by_start: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in found:
            result: dict[str, Any] = {"object": object_name}
            for name, column in fields.items():
                value = row[column] if column else 0
                result[name] = float(value) if name == "seconds" else int(value or 0)
            for name in ("project_id", "model", "api_key_id"):
                result[name] = (row[name] or None) if name in grouped else None
            by_start[int(row["start"])].append(result)
        starts = range(first, end, width)
        data = [
            {"object": "bucket", "start_time": s, "end_time": s + width, "results": by_start.get(s, [])}
            for s in starts
        ]
        final = end_time or int(time.time()) + 1
        more = end < final
        return {"object": "page", "data": data, "has_more": more, "next_page": str(end) if more else None}

    async def _flush_soon(self) -> None:
        await asyncio.sleep(self.flush_seconds)
        try:
            await self.flush()
        except StoreUnavailableError:
            log.warning("usage could not be written; kept for the next try")
