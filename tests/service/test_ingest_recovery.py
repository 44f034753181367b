"""An ingest stopped part-way (its replica closed or killed) is taken up by the next replica from what it
had embedded: the chunks of the batches it finished are not embedded again, and the file completes whole.
With a trigram model built in the tests, on a SQLite file both replicas share."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Annotated

import numpy as np

import modelport
from modelport import Parameter
from modelport.predictors.registry import ModelRegistry
from modelport.service import Service
from modelport.settings import Settings, StoreSettings
from tests.predictors.tiny_models import trigram_embed

TEXT = "\n\n".join(
    f"Paragraph {i} tells of {'cats' if i % 2 else 'the sea'} and door {i}." * 12 for i in range(200)
)
STATIC = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}


def test_a_taken_up_ingest_embeds_only_what_was_not_kept(tmp_path: Path) -> None:
    database = tmp_path / "state.db"
    settings = Settings(store=StoreSettings(url=str(database)), defaults=False)
    first: list[str] = []
    second: list[str] = []
    held = threading.Event()
    release = threading.Event()

    def stopping(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
        first.extend(texts)
        if len(first) > 64:  # one batch of the ingest's (64 chunks) is kept; the replica stops in the next
            held.set()
            release.wait(10)
        return trigram_embed(texts)

    def counting(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
        second.extend(texts)
        return trigram_embed(texts)

    async def run() -> tuple[str, list[str]]:
        registry = ModelRegistry()
        registry.add_predictor("trigram", stopping)
        replica = Service(registry, settings)
        async with modelport.AsyncOpenAI(service=replica) as client:
            upload = await client.files.create(file=("doors.txt", TEXT.encode()), purpose="assistants")
            store = await client.vector_stores.create(
                name="doors",
                file_ids=[upload.id],
                chunking_strategy=STATIC,
                extra_body={"embedding_model": "trigram"},
            )
            assert await asyncio.to_thread(held.wait, 10)
            await replica.close()  # as a replica that stops: its ingest is cancelled mid-batch
        release.set()
        with sqlite3.connect(database) as db:  # its lease run out (15 s), as if that long had passed
            db.execute("UPDATE vector_store_files SET heartbeat = 0")
        registry = ModelRegistry()
        registry.add_predictor("trigram", counting)
        taker = Service(registry, settings)
        await taker.start()  # takes up what was left in progress
        try:
            async with modelport.AsyncOpenAI(service=taker) as client:
                ingested = client.vector_stores.files.poll(
                    upload.id, vector_store_id=store.id, poll_interval_ms=50
                )
                done = await asyncio.wait_for(ingested, 60)
                chunks = [
                    part.text
                    async for part in client.vector_stores.files.content(upload.id, vector_store_id=store.id)
                ]
                return done.status, chunks
        finally:
            await taker.close()

    status, chunks = asyncio.run(run())
    assert status == "completed"
    assert len(chunks) > 128
    assert second == chunks[64:]  # the first 64 were kept: none embedded twice
    assert first[:64] == chunks[:64]
