"""The bounds of `limit` and `order` that every list route shares (the page itself is
`modelport.protocol.answers.ListPage`)."""

from __future__ import annotations

from modelport.errors import InvalidRequestError
from modelport.store import Order

MAX_LIMIT = 100


def bounded_limit(limit: int | None, default: int = 20, most: int = MAX_LIMIT) -> int:
    """A page size: at most `most` (OpenAI's bound; a client asking for more gets a full page, as OpenAI
    answers, not an error), or a 400 naming `limit` below 1."""
    if limit is None:
        return default
    if limit < 1:
        raise InvalidRequestError(f"limit must be at least 1, not {limit}.", param="limit")
    return min(limit, most)


def checked_order(order: str | None, default: Order) -> Order:
    """`asc` or `desc`, or a 400 naming `order`."""
    if order is None:
        return default
    if order not in ("asc", "desc"):
        raise InvalidRequestError(f"order must be 'asc' or 'desc', not {order!r}.", param="order")
    return "asc" if order == "asc" else "desc"
