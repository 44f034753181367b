"""What the service may know of the request in hand beyond its body: the id it is logged under (sent on to
upstreams), the session a client named, and whether it is background work. The HTTP face sets it per
request, the batch runner per line; in-process calls have none."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestContext:
    """The request id, the `x-session-id` header when a client sent one, and whether it is background work
    (a batch's line) that must leave room on the model for interactive requests."""

    request_id: str | None = None
    session_id: str | None = None
    background: bool = False


_NONE = RequestContext()
_CURRENT: ContextVar[RequestContext | None] = ContextVar("modelport_request", default=None)


def current() -> RequestContext:
    """The context of the request being served (empty in-process)."""
    return _CURRENT.get() or _NONE


def enter(context: RequestContext) -> None:
    """Make `context` the current one for this task (and the tasks it starts)."""
    _CURRENT.set(context)
