"""Documents are input from anyone, and PDFs can be built to make a reader recurse, inflate or loop for
minutes: `DocumentReader` reads their text (`engines.document_text`) in worker processes (pebble's pool),
each read bounded in pages and characters (checked as pages are read), in seconds (its worker is stopped
past them) and in memory (the worker's address space), and stopped as soon as its caller stops waiting."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
from concurrent.futures import TimeoutError as ReadTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from modelport.engines.document_text import Bounds, UnreadableError, bounded, load, read
from modelport.errors import ServerError

__all__ = ["Bounds", "DocumentReader", "UnreadableError"]

if TYPE_CHECKING:
    from pebble import ProcessPool  # with the first document (as its readers, `load`)

_READS_PER_WORKER = 32

# A forked worker inherits the server's garbage, and its first collection would finalise it there: a
# finished WebRTC call's audio resampler (FFmpeg's, with a pool of threads the child does not have) then
# waits for those threads for ever, and every read of that worker times out. What the child inherits is
# frozen out of its collections before any of its Python code runs.
os.register_at_fork(after_in_child=gc.freeze)


class DocumentReader:
    """Reads documents' text in worker processes, within `bounds`."""

    def __init__(self, bounds: Bounds, workers: int = 2) -> None:
        self.bounds = bounds
        self.workers = workers
        self._pool: ProcessPool | None = None

    async def text(self, name: str, data: bytes) -> str:
        """The document's text; `UnreadableError` if it cannot be read within the bounds. Cancelled, the
        read stops at once (its worker is stopped and another started)."""
        from pebble import ProcessExpired, ProcessPool

        if self._pool is None or not self._pool.active:
            await asyncio.to_thread(load)  # once a process; the workers forked below inherit the readers
        if self._pool is None or not self._pool.active:  # another read may have made it during that wait
            # Forked: a spawned worker would first run the program's main module again (multiprocessing's
            # way), which an in-process client's unguarded script would make load its models again. A
            # forked worker runs only the reading, and touches nothing the server's threads hold.
            self._pool = ProcessPool(
                max_workers=self.workers,
                # A worker's address space only grows (the allocator's arenas, the readers' caches) and its
                # bound is fixed at its start: a worker is replaced after this many reads, before what the
                # earlier ones left makes a later, ordinary document look too large.
                max_tasks=_READS_PER_WORKER,
                initializer=bounded,
                initargs=(self.bounds.memory_mb,),
                context=multiprocessing.get_context("fork"),
            )
        future = self._pool.schedule(read, args=(name, data, self.bounds), timeout=self.bounds.seconds)
        try:
            return await asyncio.wrap_future(future)  # cancelling this cancels `future`: its worker stops
        except ReadTimeout:
            raise UnreadableError(f"a document that takes over {self.bounds.seconds:g} s to read") from None
        except ProcessExpired:  # the worker died: out of its memory, or a reader crashed
            raise UnreadableError(f"a document that needs over {self.bounds.memory_mb} MiB to read") from None
        except BrokenProcessPool:  # workers that cannot start: the server's fault, not the document's
            self.close()
            raise ServerError("The document reader's worker processes could not start.") from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.stop()  # type: ignore[no-untyped-call]
            self._pool.join(timeout=5)
            self._pool = None
