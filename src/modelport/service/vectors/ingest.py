"""Files into a vector store, in the background: read the file (the store's project's), take its text, cut
it into chunks the store's embedding model reads whole, embed them, and write them with the file's status
`completed` at once, or mark it `failed` with why. A replica works on a file only after claiming it, and
beats its heartbeat while it works, so a file left in progress by a replica that stopped is taken up again
by another (or by this one when it starts)."""

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
from modelport.service.documents import UnreadableError, document_text
from modelport.service.state.files import Files
from modelport.service.vectors import chunking
from modelport.store import Store

log = logging.getLogger("modelport.vectors")
LEASE = 120  # seconds without a heartbeat after which another replica takes a file over
_EMBED_BATCH = 64  # chunks per embedding call


@dataclass(frozen=True)
class Embedder:
    """The service's embedding path, as vector stores use it: `embed` (counted as the caller's usage, like
    any embeddings request), `reader` (what the model reads) and `resolve` (a model name to its id)."""

    embed: Callable[[str, list[str]], Awaitable[np.ndarray]]
    reader: Callable[[str], Awaitable[chunking.Reader]]
    resolve: Callable[[str], str]


class Ingest:
    """The files being ingested by this replica."""

    def __init__(self, store: Store, files: Files, embedder: Embedder, concurrency: int = 2) -> None:
        self.rows = store.vectors
        self.chunks = store.chunks
        self.files = files
        self.embedder = embedder
        self._running: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(concurrency)

    def start(self, project: str, store_id: str, file_id: str, model: str, strategy: dict[str, Any]) -> None:
        """Ingest one of `project`'s files now, as background work of that project (its usage counted)."""
        own = contextvars.copy_context()
        own.run(context.enter, context.RequestContext(project=project, background=True))
        task = asyncio.create_task(self._ingest(store_id, file_id, model, strategy), context=own)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def resume(self, stores: Callable[[str, str], Awaitable[dict[str, Any] | None]]) -> None:
        """Take up files that a stopped replica left in progress (`stores` gives a file's store row)."""
        for row in await self.rows.abandoned(LEASE):
            store = await stores(row["vector_store_id"], row["project"])
            attached = await self.rows.file(row["vector_store_id"], row["id"])
            if store is not None and attached is not None:
                self.start(row["project"], store["id"], row["id"], store["model"], attached["chunking"])

    async def close(self) -> None:
        """Stop working (the files stay in progress, taken up again at the next start)."""
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    async def wait(self) -> None:
        """Until every file started is done (for tests and benchmarks)."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def _ingest(self, store_id: str, file_id: str, model: str, strategy: dict[str, Any]) -> None:
        async with self._slots:
            if not await self.rows.claim(store_id, file_id, LEASE):
                return
            try:
                name, data = await self.files.read(file_id, self.files.settings.max_bytes)
                text = await anyio.to_thread.run_sync(document_text, name, data)
                reader = await self.embedder.reader(model)
                pieces = await anyio.to_thread.run_sync(chunking.chunks, text, strategy, reader)
                vectors: list[np.ndarray] = []
                for start in range(0, len(pieces), _EMBED_BATCH):
                    vectors.extend(await self.embedder.embed(model, pieces[start : start + _EMBED_BATCH]))
                    await self.rows.beat(store_id, file_id)
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
