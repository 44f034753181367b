"""What the service may know of the request in hand beyond its body: the id it is logged under (sent on to
upstreams), the session a client named, whether it is background work, and whose it is (the project and
key: every stored object belongs to a project). The HTTP face sets it per request, the batch runner per
line; in-process calls are the default project's."""

from __future__ import annotations

import asyncio
import re
import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

# The project of keys given with `--api-key`, of servers without keys, and of in-process calls.
DEFAULT_PROJECT = "proj_default"


@dataclass(frozen=True)
class RequestContext:
    """The request id, the `x-session-id` header when a client sent one, whether it is background work
    (a batch's line) that must leave room on the model for interactive requests (and, set when it is no
    longer wanted, `withdrawn`), the project and key it is made with (and the key's limits), and the
    headers the service wants on the answer (rate limits)."""

    request_id: str | None = None
    session_id: str | None = None
    background: bool = False
    withdrawn: asyncio.Event | None = None
    project: str = DEFAULT_PROJECT
    key_id: str | None = None
    limits: tuple[dict[str, Any], ...] = ()
    headers: dict[str, str] = field(default_factory=dict)


class WorkWithdrawn(Exception):
    """Background work given up before it took a model's slot: its batch was cancelled while it waited."""


# A request id or session id a client may give (`x-request-id`, `x-session-id`): anything else is replaced.
SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id(given: str) -> str:
    """The id of a request: the client's `x-request-id` when it is sane, else a new one."""
    return given if SANE_ID.fullmatch(given) else f"req_{uuid.uuid4().hex}"


_NONE = RequestContext()
_CURRENT: ContextVar[RequestContext | None] = ContextVar("modelport_request", default=None)


def current() -> RequestContext:
    """The context of the request being served (empty in-process)."""
    return _CURRENT.get() or _NONE


def enter(context: RequestContext) -> None:
    """Make `context` the current one for this task (and the tasks it starts)."""
    _CURRENT.set(context)
