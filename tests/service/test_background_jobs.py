"""Background jobs (`Jobs`) over a real SQLite store, with a turn of their own standing in for the model's:
what a cancelled turn stores survives however often the job is cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio

from modelport.context import DEFAULT_PROJECT
from modelport.service.responses.background import Jobs
from modelport.store import Store


def queued(response_id: str) -> dict[str, Any]:
    return {
        "id": response_id,
        "created": 1_700_000_000,
        "model": "m",
        "status": "queued",
        "previous_response_id": None,
        "background": True,
        "heartbeat": None,
        "metadata": {},
        "request": {},
        "input_items": [],
        "response": {"id": response_id, "status": "queued", "output": []},
        "project": DEFAULT_PROJECT,
    }


def test_a_job_cancelled_again_while_its_turn_stores_what_it_made_keeps_it(tmp_path: Path) -> None:
    async def run() -> dict[str, Any] | None:
        store = Store(str(tmp_path / "state.db"))
        jobs = Jobs(store, timeout=15)
        row = queued("resp_1")
        begun, storing = asyncio.Event(), asyncio.Event()

        async def turn() -> AsyncGenerator[dict[str, Any], None]:
            made = {"id": "resp_1", "status": "cancelled", "output": ["Once upon"]}
            try:
                begun.set()
                yield {"type": "response.output_text.delta", "sequence_number": 0, "delta": "Once upon"}
                await asyncio.sleep(60)
            except BaseException:
                with anyio.CancelScope(shield=True):  # as a Responses turn keeps what it made
                    storing.set()
                    await asyncio.sleep(0.2)
                    await store.responses.settle("resp_1", made)
                raise

        await jobs.start(row, turn())
        await begun.wait()
        first = asyncio.create_task(jobs.cancel("resp_1", row["response"]))
        await storing.wait()
        # Asked again (a client's retry; the job's writer reads the first cancel from the store the same way).
        await jobs.cancel("resp_1", row["response"])
        await first
        kept = await store.responses.get("resp_1", None)
        await store.close()
        return kept

    kept = asyncio.run(run())
    assert kept is not None
    assert kept["status"] == "cancelled"
    assert kept["response"]["output"] == ["Once upon"]
