"""Memory after a large vector-store ingest: the server's resident memory (RSS) once warm (a small file
ingested), right after a large ingest (a PDF of many pages and a text of many paragraphs), and after a quiet
while; what did not come back is what the ingest left held. The worker processes that read documents are
counted apart (they are recycled, not the server).

    .venv/bin/python -m bench.ingest_memory [--pages 1500] [--paragraphs 20000] [--quiet 30]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path

import openai

from bench.common import machine, modelport_process, rss_mib, table
from tests.support.documents import pdf_of_pages

WORDS = [
    "river",
    "stone",
    "harbour",
    "lantern",
    "orchard",
    "meadow",
    "copper",
    "signal",
    "winter",
    "ledger",
    "violet",
    "garden",
    "station",
    "compass",
    "thunder",
    "marble",
    "engine",
    "willow",
    "canyon",
    "saddle",
    "ember",
    "falcon",
    "velvet",
    "island",
    "quarry",
]


def children_rss_mib(pid: int) -> float:
    """The resident memory of a process's children (the document workers), MiB."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                total += rss_mib(int(entry.name))
    return total


def paragraphs(count: int) -> bytes:
    """`count` paragraphs of made-up prose, each different."""
    rng = random.Random(7)
    return "\n\n".join(
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 30))).capitalize() + "."
        for _ in range(count)
    ).encode()


def main(pages: int, count: int, quiet: float) -> None:
    print(f"# Memory after a large ingest ({pages}-page PDF, {count} paragraphs)\n\n{machine()}")
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"ingest-memory-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    with modelport_process("--database", str(folder / "state.db")) as (url, pid):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0, timeout=1800)
        store = client.vector_stores.create(name="memory")
        client.vector_stores.files.upload_and_poll(
            vector_store_id=store.id, file=("warm.txt", paragraphs(50))
        )
        time.sleep(2)
        rows = [["warm (a small file ingested)", f"{rss_mib(pid):.0f}", f"{children_rss_mib(pid):.0f}"]]
        started = time.monotonic()
        for name, content in (
            ("big.pdf", pdf_of_pages(pages, "a page of the big document")),
            ("big.txt", paragraphs(count)),
        ):
            done = client.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=(name, content))
            assert done.status == "completed", done.last_error
        took = time.monotonic() - started
        rows.append(
            [f"after the large ingest ({took:.0f} s)", f"{rss_mib(pid):.0f}", f"{children_rss_mib(pid):.0f}"]
        )
        time.sleep(quiet)
        rows.append([f"{quiet:.0f} s later", f"{rss_mib(pid):.0f}", f"{children_rss_mib(pid):.0f}"])
        chunks = client.vector_stores.retrieve(store.id).file_counts
    print(table("Resident memory (MiB)", ["when", "server", "document workers"], rows))
    before, last = float(rows[0][1]), float(rows[-1][1])
    print(f"\nfiles: {chunks}; the server kept {last - before:+.0f} MiB ({(last / before - 1) * 100:+.0f}%).")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--paragraphs", type=int, default=20_000)
    parser.add_argument("--quiet", type=float, default=30.0)
    options = parser.parse_args()
    main(options.pages, options.paragraphs, options.quiet)
