"""Lists in OpenAI's shape: a page of objects and whether more follow, and the bounds of `limit` and `order`
that every list route shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from modelport.errors import InvalidRequestError
from modelport.store import Order

T = TypeVar("T")
MAX_LIMIT = 100


@dataclass(frozen=True)
class ListPage(Generic[T]):
    """A page in OpenAI's list shape."""

    data: list[T]
    has_more: bool

    def body(self) -> dict[str, Any]:
        """The JSON body of the page."""
        data = [_jsonable(item) for item in self.data]
        ids = [item.get("id") for item in data]
        return {
            "object": "list",
            "data": data,
            "first_id": ids[0] if ids else None,
            "last_id": ids[-1] if ids else None,
            "has_more": self.has_more,
        }


def _jsonable(item: object) -> dict[str, Any]:
    if isinstance(item, BaseModel):
        return item.model_dump(mode="json", warnings=False, by_alias=True)
    assert isinstance(item, dict)
    return item


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
