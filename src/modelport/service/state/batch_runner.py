"""Running batches: each line through the service as background work (it takes a model slot only when some
stay free for interactive requests), its result recorded as it ends, so a restarted server resumes a batch
without running a finished line again.

One replica runs a batch: it holds the batch's lease and renews it with a heartbeat; a batch whose lease
went stale (its server stopped) is taken over by whichever replica looks next. A cancel, stored by any
replica, is read at the next heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson
from openai.types import Batch, BatchError, BatchRequestCounts, BatchUsage
from openai.types.batch import Errors
from openai.types.batch_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel

from modelport import context
from modelport.context import RequestContext
from modelport.errors import InvalidRequestError, ModelportError, PredictorError, StoreUnavailableError
from modelport.ids import new_id
from modelport.service.state.files import Files, checked_lines
from modelport.store import Store
from modelport.tasks import stopped

log = logging.getLogger("modelport.batches")
HEARTBEAT = 2  # seconds between the lease's renewals (and looks at the batch's stored status), at most
_MOST_ERRORS = 1000  # errors a failed batch lists
_POLL = 5.0  # seconds between looks for batches to run (one created here wakes the runner at once; a
# stale lease elsewhere is only claimable after its `lease` anyway). Each look is a query: less often is
# less CPU.

# A line's `url` and request body → the service's answer; an error raises a `ModelportError`.
LineCall = Callable[[str, dict[str, Any]], Awaitable[object]]


class BatchRunner:
    """Finds the batches this server should run and runs them."""

    def __init__(
        self,
        store: Store | None,
        files: Files,
        run_line: LineCall,
        known_model: Callable[[str], bool],
        concurrency: int,
        lease: float = 10.0,
    ) -> None:
        self.store = store
        self.files = files
        self.run_line = run_line
        self.known_model = known_model  # whether a line's `model` is served here, checked as it validates
        self.concurrency = concurrency
        self.lease = lease  # seconds without a renewal after which another replica may take a batch over
        self.heartbeat = min(HEARTBEAT, lease / 5)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{new_id('r', '')[-8:]}"
        self._running: dict[str, asyncio.Task[None]] = {}
        self._stops: dict[str, asyncio.Event] = {}  # set to start no more of a running batch's lines
        self._loop: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Look for batches now (one was created or cancelled), starting the runner if it is not running."""
        self.start()
        self._wake.set()

    def cancelled(self, batch_id: str) -> None:
        """A batch was cancelled here: if it runs here, no more of its lines start (a cancel another server
        stored is seen at the next heartbeat, `HEARTBEAT` seconds at most)."""
        stop = self._stops.get(batch_id)
        if stop is not None:
            stop.set()
        self.wake()

    def start(self) -> None:
        """Run batches from now on, in the running event loop."""
        if self.store is not None and (self._loop is None or self._loop.done()):
            self._wake = asyncio.Event()
            self._loop = asyncio.get_running_loop().create_task(self._look_forever(), name="batches")

    async def close(self) -> None:
        """Stop (a batch this server was running is taken over after its lease goes stale)."""
        tasks = [t for t in (self._loop, *self._running.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _look_forever(self) -> None:
        assert self.store is not None
        while True:
            try:
                for row in await self.store.batches.claim(self.owner, self.lease):
                    if row["id"] not in self._running:
                        self._running[row["id"]] = asyncio.create_task(
                            self._run(Batch.model_validate(row["batch"]), row["project"]), name=row["id"]
                        )
            except StoreUnavailableError:
                pass  # logged by the store; looked at again in a moment
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), _POLL)
            self._wake.clear()

    async def _run(self, batch: Batch, project: str) -> None:
        assert self.store is not None
        try:
            await self._run_stages(batch, project)
        finally:
            self._running.pop(batch.id, None)

    async def _put(self, batch: Batch) -> str | None:
        """Store the batch's new state as this runner (`BatchRows.put`): as the JSON it was read from, with
        the fields set since."""
        assert self.store is not None
        return await self.store.batches.put(batch.model_dump(mode="json", exclude_unset=True), self.owner)

    async def _run_stages(self, batch: Batch, project: str) -> None:
        """A batch runs as its creator's project: its lines' stored objects and usage are that project's."""
        assert self.store is not None
        try:
            if batch.status == "validating":
                batch = await self._validated(batch, project)
                if batch.status == "failed":
                    return
            if batch.status == "in_progress":
                batch = await self._lines(batch, project)
            await self._finish(batch, project)
        except FileNotFoundError:  # its input deleted while it ran: it can never run, so it fails now
            await self._input_gone(batch, project)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("batch %s stopped; it is taken up again when its lease goes stale", batch.id)

    async def _validated(self, batch: Batch, project: str) -> Batch:
        """The batch after its input is checked: `in_progress`, or `failed` with an error per line at fault
        (as OpenAI's batches fail while they validate), or `cancelling` if it was cancelled meanwhile."""
        assert self.store is not None
        file_id = batch.input_file_id
        try:
            # Only the project's own file: a batch may name any id, another project's included.
            if await self.store.files.get(file_id, project) is None:
                raise FileNotFoundError(file_id)
            path = self.files.path(file_id)
            lines, errors = await anyio.to_thread.run_sync(
                checked_lines, path, batch.endpoint, self.known_model
            )
            found = [BatchError.model_validate(error) for error in errors]
        except FileNotFoundError:  # never there, or deleted since the batch was made: nothing to run, ever
            lines, found = [], [_missing_input(file_id, project)]
        now = int(time.time())
        if found:
            total = len(lines) + sum(error.line is not None for error in found)
            batch = batch.model_copy(
                update={
                    "status": "failed",
                    "failed_at": now,
                    "errors": Errors(object="list", data=found[:_MOST_ERRORS]),
                    "request_counts": _counts(total, 0, 0),
                }
            )
        else:
            update = {
                "status": "in_progress",
                "in_progress_at": now,
                "request_counts": _counts(len(lines), 0, 0),
            }
            batch = batch.model_copy(update=update)
        if await self._put(batch) is not None:
            return await self._as_cancelled(batch)  # cancelled while it validated: the cancel stands
        if batch.status == "failed":
            log.info("batch %s failed validation: %d errors", batch.id, len(found))
        return batch

    async def _input_gone(self, batch: Batch, project: str) -> None:
        """Fail a running batch whose input file was deleted under it (what it answered is kept in the
        store; with no input, no line can be told apart)."""
        missing = _missing_input(batch.input_file_id, project)
        update = {
            "status": "failed",
            "failed_at": int(time.time()),
            "errors": Errors(object="list", data=[missing]),
        }
        if await self._put(batch.model_copy(update=update)) is None:
            log.info("batch %s failed: its input file %s was deleted", batch.id, batch.input_file_id)

    async def _as_cancelled(self, batch: Batch) -> Batch:
        """`batch` as the cancel that came first left it: `cancelling`, since when, and no failure."""
        assert self.store is not None
        stored = await self.store.batches.get(batch.id, None)
        since = (stored or {}).get("batch", {}).get("cancelling_at") or int(time.time())
        update = {"status": "cancelling", "cancelling_at": since, "errors": None, "failed_at": None}
        return batch.model_copy(update=update)

    async def _lines(self, batch: Batch, project: str) -> Batch:
        """Run the lines that have no result yet; the batch as it stands when they are done, or when it
        was cancelled or expired."""
        store = self.store
        assert store is not None
        lines = checked_lines(self.files.path(batch.input_file_id), batch.endpoint)[0]
        done = await store.batches.done_lines(batch.id)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for line in lines:
            if line["line"] not in done:
                queue.put_nowait(line)
        stop = self._stops[batch.id] = asyncio.Event()
        state = {"batch": batch}

        async def worker() -> None:
            while not stop.is_set() and not queue.empty():
                line = queue.get_nowait()
                if batch.expires_at is not None and time.time() > batch.expires_at:
                    state["batch"] = state["batch"].model_copy(update={"status": "expired"})
                    stop.set()
                    return
                ran = await self._line(batch.endpoint, line, project, stop)
                if ran is not None:  # withdrawn by a cancel before it took a slot: it never ran
                    await store.batches.add_result(batch.id, line["line"], *ran)

        async def heartbeat() -> None:
            while True:
                await asyncio.sleep(self.heartbeat)
                completed, failed = await store.batches.counts(batch.id)
                counts = _counts(len(lines), completed, failed)
                current = state["batch"].model_copy(update={"request_counts": counts})
                if await self._put(current) == "cancelling":
                    state["batch"] = current.model_copy(update={"status": "cancelling"})
                    stop.set()

        beating = asyncio.create_task(heartbeat())
        try:
            await asyncio.gather(*(worker() for _ in range(min(self.concurrency, max(1, queue.qsize())))))
        finally:
            self._stops.pop(batch.id, None)
            await stopped(beating)
        stored = await store.batches.get(batch.id, None)
        if stored is not None and stored["status"] == "cancelling":
            since = stored["batch"].get("cancelling_at")
            return state["batch"].model_copy(update={"status": "cancelling", "cancelling_at": since})
        return state["batch"]

    async def _line(
        self, endpoint: str, line: dict[str, Any], project: str, withdrawn: asyncio.Event
    ) -> tuple[bool, dict[str, Any]] | None:
        """One request, as background work; the line of the output file, or of the error file (None: it was
        withdrawn, `withdrawn` set, before it took a model's slot)."""
        request_id = new_id("batch_req", "_")
        asked = RequestContext(request_id=request_id, background=True, project=project, withdrawn=withdrawn)
        context.enter(asked)
        record: dict[str, Any] = {"id": request_id, "custom_id": line["custom_id"], "error": None}
        try:
            if line["body"].get("stream") or line["body"].get("background"):
                raise InvalidRequestError("A batch's requests are neither streamed nor in the background.")
            body = _result_body(await self.run_line(endpoint, line["body"]))
        except context.WorkWithdrawn:
            return None
        except ModelportError as error:
            record["response"] = {"status_code": error.status, "request_id": request_id, "body": error.body()}
            return False, record
        except Exception as error:  # nothing a line holds may stop its batch
            log.exception("batch line %s failed", line["custom_id"])
            failure = PredictorError(f"The request failed: {type(error).__name__}: {error}")
            record["response"] = {"status_code": 500, "request_id": request_id, "body": failure.body()}
            return False, record
        record["response"] = {"status_code": 200, "request_id": request_id, "body": body}
        return True, record

    async def _finish(self, batch: Batch, project: str) -> None:
        """Write the output and error files, and end the batch: completed, cancelled or expired."""
        assert self.store is not None
        now = int(time.time())
        results = await self.store.batches.results(batch.id)
        # Lines with no result: only an expired batch has any (read for one whose end is not known yet).
        not_run = self._not_run(batch, results) if batch.status in ("expired", "finalizing") else []
        ending = {"in_progress": "completed", "cancelling": "cancelled"}.get(batch.status, batch.status)
        if ending == "finalizing":  # a finish its server began before it stopped: it ends as that one would
            ending = "expired" if not_run else "completed"
        if ending != "cancelled":
            since = batch.finalizing_at or now
            finalizing = batch.model_copy(update={"status": "finalizing", "finalizing_at": since})
            if await self._put(finalizing) is None:
                batch = finalizing
            else:  # cancelled since its last heartbeat: it ends cancelled
                batch, ending = await self._as_cancelled(batch), "cancelled"
        outputs = [output for ok, output in results if ok]
        errors = [output for ok, output in results if not ok]
        if ending == "expired":
            errors += [_expired(custom_id) for custom_id in not_run]
        suffix = batch.id.removeprefix("batch_")
        files: dict[str, str] = {}
        for items, field, name in (
            (outputs, "output_file_id", "output"),
            (errors, "error_file_id", "errors"),
        ):
            if items:  # the same file id again if a finish is repeated after a restart
                content = b"".join(orjson.dumps(item) + b"\n" for item in items)
                filename = f"{batch.id}_{name}.jsonl"
                made = await self.files.save(
                    f"file-{suffix}-{name}", content, filename, "batch_output", project
                )
                files[field] = made.id
        total = batch.request_counts.total if batch.request_counts is not None else 0
        ended: dict[str, object] = {
            **files,
            "status": ending,
            "request_counts": _counts(total, len(outputs), len(errors)),
            "usage": _usage(outputs),
            f"{ending}_at": int(time.time()),
        }
        await self._put(batch.model_copy(update=ended))
        log.info("batch %s %s: %d done, %d failed", batch.id, ending, len(outputs), len(errors))

    def _not_run(self, batch: Batch, results: list[tuple[bool, dict[str, Any]]]) -> list[str]:
        """The custom ids of the batch's lines that have no result (it expired before they ran)."""
        finished = {output["custom_id"] for _, output in results}
        lines = checked_lines(self.files.path(batch.input_file_id), batch.endpoint)[0]
        return [line["custom_id"] for line in lines if line["custom_id"] not in finished]


def _result_body(answer: object) -> dict[str, Any]:
    """A line's answer as its result's `body`: a batch runs requests for whole answers only."""
    if not isinstance(answer, BaseModel):
        raise InvalidRequestError("A batch's requests are neither streamed nor in the background.")
    return answer.model_dump(mode="json", exclude_unset=True, warnings=False, by_alias=True)


def _counts(total: int, completed: int, failed: int) -> BatchRequestCounts:
    return BatchRequestCounts(total=total, completed=completed, failed=failed)


def _usage(outputs: list[dict[str, Any]]) -> BatchUsage:
    """Tokens over the batch's answers, in the Batch object's usage shape."""
    tokens = {"input": 0, "output": 0, "cached": 0}
    for output in outputs:
        usage = (output["response"]["body"] or {}).get("usage") or {}
        tokens["input"] += int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
        tokens["output"] += int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        tokens["cached"] += int(details.get("cached_tokens") or 0)
    return BatchUsage(
        input_tokens=tokens["input"],
        input_tokens_details=InputTokensDetails(cached_tokens=tokens["cached"]),
        output_tokens=tokens["output"],
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=tokens["input"] + tokens["output"],
    )


def _expired(custom_id: str) -> dict[str, Any]:
    return {
        "id": new_id("batch_req", "_"),
        "custom_id": custom_id,
        "response": None,
        "error": {
            "code": "batch_expired",
            "message": "The request was not run before the batch's window ended.",
        },
    }


def _missing_input(file_id: str, project: str) -> BatchError:
    """A batch's error for an input file its project does not have: OpenAI's, word for word but the project
    for the organization."""
    message = f"Cannot find file {file_id}, or project {project} does not have access to it."
    return BatchError(code="invalid_request", line=None, message=message, param="file_id")
