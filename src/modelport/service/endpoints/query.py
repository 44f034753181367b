"""Query-string parameters the SDKs send in more than one shape."""

from __future__ import annotations

from modelport.service.operations import QueryItems


def listed(query: QueryItems, name: str) -> list[str]:
    """A list in the query string, as `name=a&name=b` or as the SDKs send it, `name[]=a&name[]=b`."""
    return [value for key, value in query if key in (name, f"{name}[]")]


def filtered(query: QueryItems, name: str) -> dict[str, str]:
    """`name[key]=value` items as a dict."""
    start = f"{name}["
    return {
        key[len(start) : -1]: value for key, value in query if key.startswith(start) and key.endswith("]")
    }
