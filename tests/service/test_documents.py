"""Documents read in bounded worker processes: hostile PDFs are refused by name and in bounded time, a
read past its seconds or memory is stopped, and a read whose caller left stops at once (no CPU after)."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from modelport.service.documents import Bounds, DocumentReader, UnreadableError
from tests.support.documents import HOSTILE_PDF_NAMES, hostile_pdfs, pdf
from tests.support.machine_load import slack

# Worker processes started and stopped, and seconds of hostile reading: the slow tier, not the unit one.
pytestmark = pytest.mark.slow
# Read within their bounds (PDFium reads a string of 32,767 characters at most): answered.
READABLE = {"a /Length of 99999999999", "200 MB of text in 200 KB"}


def children_cpu_seconds() -> float:
    """CPU time of this process's child processes (the document workers), as /proc counts it now."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("name", sorted(HOSTILE_PDF_NAMES))
def test_a_hostile_pdf_is_a_400_naming_the_part_in_bounded_time(tiny: Any, name: str) -> None:
    data = base64.b64encode(hostile_pdfs()[name]).decode()
    part = {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{data}", "filename": "x.pdf"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "Read this."}, part]}]
    started = time.monotonic()
    if name in READABLE:
        tiny.chat.completions.create(model="recall", messages=messages)
    else:
        with pytest.raises(openai.BadRequestError) as refused:
            tiny.chat.completions.create(model="recall", messages=messages)
        assert refused.value.body["param"] == "messages[0].content[1]"
        assert "x.pdf" in refused.value.body["message"]
    assert time.monotonic() - started < 15 * slack()


def test_a_read_past_its_seconds_is_stopped() -> None:
    reader = DocumentReader(Bounds(pages=100_000, seconds=1.0))
    try:
        started = time.monotonic()
        with pytest.raises(UnreadableError, match="takes over 1 s"):
            asyncio.run(reader.text("big.pdf", hostile_pdfs()["20,000 pages"]))
        assert time.monotonic() - started < 10 * slack()  # a worker's start, then one second
    finally:
        reader.close()


def test_a_read_whose_caller_leaves_stops_at_once() -> None:
    reader = DocumentReader(Bounds(pages=100_000, seconds=120.0))

    async def leave_after_a_second() -> None:
        reading = asyncio.ensure_future(reader.text("big.pdf", hostile_pdfs()["20,000 pages"] * 1))
        await asyncio.sleep(3.0)  # the worker started and is reading
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading

    try:
        asyncio.run(leave_after_a_second())
        time.sleep(1.0)  # the stopped worker's replacement starts
        before = children_cpu_seconds()
        time.sleep(2.0)
        assert children_cpu_seconds() - before < 0.3  # nothing reads on for a caller that left
        assert asyncio.run(reader.text("q.pdf", pdf("still reading"))) == "still reading"
    finally:
        reader.close()


def test_a_worker_is_held_to_its_memory() -> None:
    reader = DocumentReader(Bounds(memory_mb=128, chars=10**10))
    try:
        with pytest.raises(UnreadableError, match="128 MiB"):
            asyncio.run(reader.text("bomb.pdf", hostile_pdfs()["200 MB of text in 200 KB"]))
        assert asyncio.run(reader.text("q.pdf", pdf("hello"))) == "hello"  # a new worker took its place
    finally:
        reader.close()
