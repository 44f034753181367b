"""Files into a vector store, in the background: read the file (the store's project's), take its text, cut
it into chunks the store's embedding model reads whole, embed them, and write them with the file's status
`completed` at once, or mark it `failed` with why. A replica works on a file only after claiming it, and
beats its heartbeat every few seconds while it works (reading the document included), so a file left in
progress by a replica that stopped is taken up again by another, or by this one when it starts, once its
lease (`[vector_stores] lease`) has passed: every replica looks for such files at start and then every
`LOOK` seconds."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np

from modelport import context
from modelport.errors import ModelportError
from modelport.service.documents import DocumentReader, UnreadableError
from modelport.service.state.files import Files
from modelport.service.vectors import chunking
from modelport.store import Store

log = logging.getLogger("modelport.vectors")
BEAT = 3  # seconds between heartbeats of a file being worked on, at most (a fifth of a shorter lease)
LOOK = 5  # seconds between looks for files a stopped replica left
_EMBED_BATCH = 64  # chunks per embedding call


@dataclass(frozen=True)
class Embedder:
    """The service's embedding path, as vector stores use it: `embed` (counted as the caller's usage, like
    any embeddings request), `reader` (what the model reads) and `resolve` (a model name to its id)."""

    embed: Callable[[str, list[str]], Awaitable[np.ndarray]]
    reader: Callable[[str], Awaitable[chunking.EmbeddingReader]]
    resolve: Callable[[str], str]


class Ingest:
    """The files being ingested by this replica."""

    def __init__(
        self,
        store: Store,
        files: Files,
        embedder: Embedder,
        documents: DocumentReader,
        lease: float,
        concurrency: int = 2,
    ) -> None:
        self.rows = store.vectors
        self.chunks = store.chunks
        self.files = files
        self.embedder = embedder
        self.documents = documents
        self.lease = lease  # seconds without a heartbeat after which another replica takes a file over
        self._running: dict[tuple[str, str], asyncio.Task[None]] = {}  # by (store, file), until done
        self._slots = asyncio.Semaphore(concurrency)
        self._looking: asyncio.Task[None] | None = None

    def start(self, project: str, store_id: str, file_id: str, model: str, strategy: dict[str, Any]) -> None:
        """Ingest one of `project`'s files now, as background work of that project (its usage counted)."""
        key = (store_id, file_id)
        if key in self._running:
            return
        own = contextvars.copy_context()
        own.run(context.enter, context.RequestContext(project=project, background=True))
        task = asyncio.create_task(self._ingest(store_id, file_id, model, strategy), context=own)
        self._running[key] = task
        task.add_done_callback(lambda _: self._running.pop(key, None))

    async def resume(self, stores: Callable[[str, str], Awaitable[dict[str, Any] | None]]) -> None:
        """Take up files that a stopped replica left in progress (`stores` gives a file's store row), now
        and every `LOOK` seconds from now on."""
        await self._take_up(stores)
        if self._looking is None:
            self._looking = asyncio.create_task(self._look(stores), name="ingest-recovery")

    async def _look(self, stores: Callable[[str, str], Awaitable[dict[str, Any] | None]]) -> None:
        while True:
            await asyncio.sleep(LOOK)
            try:
                await self._take_up(stores)
            except Exception:  # the store is down (logged there): looked at again in a moment
                log.debug("looking for abandoned files failed", exc_info=True)

    async def _take_up(self, stores: Callable[[str, str], Awaitable[dict[str, Any] | None]]) -> None:
        for row in await self.rows.abandoned(self.lease):
            if (row["vector_store_id"], row["id"]) in self._running:
                continue  # waiting for a slot here
            store = await stores(row["vector_store_id"], row["project"])
            attached = await self.rows.file(row["vector_store_id"], row["id"])
            if store is not None and attached is not None:
                log.info("vector store %s: taking up file %s, left in progress", store["id"], row["id"])
                self.start(row["project"], store["id"], row["id"], store["model"], attached["chunking"])

    async def close(self) -> None:
        """Stop working (the files stay in progress, taken up again at the next start)."""
        if self._looking is not None:
            self._looking.cancel()
            self._looking = None
        for task in list(self._running.values()):
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def wait(self) -> None:
        """Until every file started is done (for tests and benchmarks)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def _ingest(self, store_id: str, file_id: str, model: str, strategy: dict[str, Any]) -> None:
        async with self._slots:
            if not await self.rows.claim(store_id, file_id, self.lease):
                return
            beating = asyncio.create_task(self._beat(store_id, file_id))
            try:
                name, data = await self.files.read(file_id, self.files.settings.max_bytes)
                text = await self.documents.text(name, data)
                reader = await self.embedder.reader(model)
                pieces = await anyio.to_thread.run_sync(chunking.chunks, text, strategy, reader)
                # What an ingest of this file that stopped (its replica killed) kept is not embedded again.
                vectors = await self.chunks.drafted(store_id, file_id, pieces)
                for start in range(len(vectors), len(pieces), _EMBED_BATCH):
                    batch = pieces[start : start + _EMBED_BATCH]
                    embedded = list(await self.embedder.embed(model, batch))
                    if not await self.chunks.draft(
                        store_id, file_id, start, list(zip(batch, embedded, strict=True))
                    ):
                        return  # cancelled or taken out meanwhile
                    vectors.extend(embedded)
                made = list(zip(pieces, vectors, strict=True))
                used = sum(len(piece.encode()) + 4 * len(vector) for piece, vector in made)
                await self.chunks.complete(store_id, file_id, made, used)
            except UnreadableError as error:
                code = "unsupported_file" if error.unsupported else "invalid_file"
                await self.rows.fail(store_id, file_id, code, f"The file {file_id} is {error}.")
            except ModelportError as error:
                await self.rows.fail(store_id, file_id, "server_error", error.message)
            except Exception as error:
                log.exception("vector store %s: file %s failed", store_id, file_id)
                await self.rows.fail(store_id, file_id, "server_error", f"{type(error).__name__}: {error}")
            finally:
                beating.cancel()

    async def _beat(self, store_id: str, file_id: str) -> None:
        """The file's heartbeat while it is worked on here: every `BEAT` seconds, or oftener where the lease
        is short, so that a file is never taken from a replica still working on it."""
        while True:
            await asyncio.sleep(min(BEAT, self.lease / 5))
            try:
                await self.rows.beat(store_id, file_id)
            except Exception:  # the store is down (logged there): beaten again in a moment
                log.debug("heartbeat of %s failed", file_id, exc_info=True)
