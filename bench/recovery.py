"""Benchmark: recovery from kill -9: each kind of stored work — a vector store file's ingest, a batch, a
background response — run once to its end, then again killed with SIGKILL at points through it and started
again on the same store and data folder (the defaults' leases and timeouts). For each: the seconds from the
restart (the new server ready) to the work's end, beside the whole unkilled run; and what the restarted server
did again, counted by its own token counters (`/metrics`): chunks' tokens embedded against the file's, lines
answered against those the store had not yet kept.

    .venv/bin/python -m bench.recovery [--paragraphs 1500] [--lines 48]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

from bench.common import NO_EOS, machine, scratch, table
from tests.support.live import ROOT, LiveServer, tokens_counted

CHAT = "smollm2-135m-instruct"
EMBEDDING = "all-minilm-l6-v2"
CONFIG = (
    "defaults = false\n"
    f'[[models]]\nid = "{CHAT}"\nengine = "llamacpp"\n'
    f'[[models]]\nid = "{EMBEDDING}"\nengine = "onnx-embedding"\n'
)
LINE_TOKENS = 24  # completion tokens of every batch line (end of text banned)
ANSWER_TOKENS = 600  # of the background response
KILLED_AT = (0.0, 0.5, 0.9)  # fractions of the unkilled run's time
WAIT = 600  # seconds any piece of work may take before the bench gives up on it


@dataclass
class Work:
    """One kind of stored work: how it starts (its handle), whether it has ended (its final status, or None),
    and the token counter its work shows in (counted as each call ends: an embedding call, a batch line,
    a whole answer)."""

    name: str
    begin: Callable[[openai.OpenAI], Any]
    ended: Callable[[openai.OpenAI, Any], str | None]
    counter: tuple[str, str]  # (model, kind) of `modelport_tokens_total`
    unit: int  # its tokens a unit of work (a line, an answer; a token for an ingest)
    units: str  # what the units are


def ingest(paragraphs: int) -> Work:
    text = "\n\n".join(
        f"Paragraph {i}: the vault number {i * 7919 % 10007} opens door {i}." for i in range(paragraphs)
    )

    def begin(client: openai.OpenAI) -> tuple[str, str]:
        uploaded = client.files.create(file=("notes.txt", text.encode()), purpose="assistants")
        store = client.vector_stores.create(name="notes", file_ids=[uploaded.id])
        return store.id, uploaded.id

    def ended(client: openai.OpenAI, handle: tuple[str, str]) -> str | None:
        status = client.vector_stores.files.retrieve(handle[1], vector_store_id=handle[0]).status
        return None if status == "in_progress" else status

    return Work("ingest", begin, ended, (EMBEDDING, "prompt"), 1, "tokens embedded")


def batch(lines: int) -> Work:
    body = [
        {"custom_id": f"line-{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": CHAT, "messages": [{"role": "user", "content": f"{i}. Tell me a story."}],
                  "max_tokens": LINE_TOKENS, "logit_bias": NO_EOS}}
        for i in range(lines)
    ]  # fmt: skip
    content = "".join(json.dumps(line) + "\n" for line in body)

    def begin(client: openai.OpenAI) -> str:
        uploaded = client.files.create(file=("lines.jsonl", content.encode()), purpose="batch")
        return client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        ).id

    def ended(client: openai.OpenAI, batch_id: str) -> str | None:
        status = client.batches.retrieve(batch_id).status
        return status if status in ("completed", "failed", "cancelled", "expired") else None

    return Work("batch", begin, ended, (CHAT, "completion"), LINE_TOKENS, "lines answered")


def background() -> Work:
    def begin(client: openai.OpenAI) -> str:
        return client.responses.create(
            model=CHAT,
            input="Tell me a very long story.",
            max_output_tokens=ANSWER_TOKENS,
            background=True,
            extra_body={"logit_bias": NO_EOS},
        ).id

    def ended(client: openai.OpenAI, response_id: str) -> str | None:
        status = client.responses.retrieve(response_id).status
        return None if status in ("queued", "in_progress") else status

    return Work("background response", begin, ended, (CHAT, "completion"), ANSWER_TOKENS, "answers")


def start(folder: Path) -> LiveServer:
    (folder / "models.toml").write_text(CONFIG)
    env = {"MODELPORT_DATA_DIR": str(folder / "data")}
    args = ("--config", str(folder / "models.toml"), "--database", str(folder / "state.db"))
    live = LiveServer(*args, "--log-level", "warning", env=env, cwd=ROOT)
    live.wait_ready()
    return live


def sdk(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key="bench", max_retries=0, timeout=120)


def until_ended(client: openai.OpenAI, work: Work, handle: Any) -> str:
    deadline = time.monotonic() + WAIT
    while (status := work.ended(client, handle)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the {work.name} did not end within {WAIT} s")
        time.sleep(0.2)
    return status


def unkilled(work: Work) -> tuple[float, float, str]:
    """Seconds from start to end of the work on one server, the tokens it counted, and its end status."""
    live = start(scratch("recovery"))
    try:
        client = sdk(live)
        begun = time.monotonic()
        status = until_ended(client, work, work.begin(client))
        return time.monotonic() - begun, tokens_counted(live.url, *work.counter), status
    finally:
        live.stop()


def killed(work: Work, after: float, whole: float) -> list[object]:
    """The work killed `after` seconds in and taken up by a new server: a row of the table. What was done
    twice is what both servers counted past the unkilled run's whole."""
    folder = scratch("recovery")
    first = start(folder)
    client = sdk(first)
    handle = work.begin(client)
    time.sleep(after)
    before = tokens_counted(first.url, *work.counter)
    os.kill(first.pid, signal.SIGKILL)
    first.process.wait()
    first.stop()
    restarted = time.monotonic()
    second = start(folder)
    try:
        ready = time.monotonic() - restarted
        status = until_ended(sdk(second), work, handle)
        finished = time.monotonic() - restarted
        done = tokens_counted(second.url, *work.counter)
    finally:
        second.stop()
    twice = max(0.0, before + done - whole)
    return [f"killed at {after:.1f} s", ready, finished - ready, status, before / work.unit,
            done / work.unit, twice / work.unit]  # fmt: skip


def main(paragraphs: int, lines: int) -> None:
    print(f"# Recovery from kill -9\n\n{machine()}")
    for work in (ingest(paragraphs), batch(lines), background()):
        seconds, whole, status = unkilled(work)
        rows: list[list[object]] = [["not killed", "", seconds, status, whole / work.unit, "", ""]]
        rows += [killed(work, fraction * seconds, whole) for fraction in KILLED_AT]
        print(
            table(
                f"{work.name}: {whole / work.unit:.0f} {work.units} in {seconds:.1f} s unkilled",
                ["run", "restart to ready s", "ready to end s", "end", f"{work.units}: first server",
                 "second server", "done twice"],
                rows,
            )
        )  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paragraphs", type=int, default=1_500, help="paragraphs of the ingested file")
    parser.add_argument("--lines", type=int, default=48, help="lines of the batch")
    arguments = parser.parse_args()
    main(arguments.paragraphs, arguments.lines)
