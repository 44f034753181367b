"""Ending an asyncio task from another: cancelled and waited for, where the waiter's own cancellation still
reaches the waiter."""

from __future__ import annotations

import asyncio
from typing import Any


async def stopped(task: asyncio.Future[Any]) -> None:
    """Cancel `task` and wait for it to end, its cancellation taken as its end. A cancellation of the caller
    asked for meanwhile (a shutdown's deadline, a client's `wait_for`) is raised: suppressing every
    `CancelledError` around the wait took the caller's for the task's, and the caller went on as if never
    cancelled. One asked for before (cleanup in a task being cancelled) is left to the caller, as it was."""
    current = asyncio.current_task()
    asked = current.cancelling() if current is not None else 0
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if current is not None and current.cancelling() > asked:
            raise
