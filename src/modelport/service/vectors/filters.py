"""OpenAI's attribute filters for vector store search and `file_search`: comparisons (`eq`, `ne`, `gt`,
`gte`, `lt`, `lte`, `in`, `nin`) of one attribute with a value, and `and` / `or` of filters. Checked whole
before a search runs (a 400 naming the part at fault), then applied to each file's attributes."""

from __future__ import annotations

from typing import Any

from modelport.errors import InvalidRequestError

_COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")
_COMPOUNDS = ("and", "or")
_DEPTH = 8


def checked_filter(given: Any, param: str = "filters", depth: int = 0) -> dict[str, Any]:
    """The filter, or a 400 naming the part that is not one."""
    if not isinstance(given, dict):
        raise _bad(param, "must be an object")
    kind = given.get("type")
    if kind in _COMPOUNDS:
        parts = given.get("filters")
        if not isinstance(parts, list) or not parts:
            raise _bad(f"{param}.filters", "must be a non-empty list of filters")
        if depth >= _DEPTH:
            raise _bad(param, f"nests filters more than {_DEPTH} deep")
        return {
            "type": kind,
            "filters": [checked_filter(p, f"{param}.filters[{i}]", depth + 1) for i, p in enumerate(parts)],
        }
    if kind not in _COMPARISONS:
        raise _bad(f"{param}.type", f"must be one of {', '.join(_COMPARISONS + _COMPOUNDS)}, not {kind!r}")
    key, value = given.get("key"), given.get("value")
    if not isinstance(key, str) or not key:
        raise _bad(f"{param}.key", "must be the name of an attribute")
    if kind in ("in", "nin"):
        if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
            raise _bad(f"{param}.value", f"must be a list of strings or numbers for `{kind}`")
    elif not isinstance(value, (str, int, float, bool)):
        raise _bad(f"{param}.value", "must be a string, number or boolean")
    elif kind in ("gt", "gte", "lt", "lte") and (
        isinstance(value, bool) or not isinstance(value, (int, float, str))
    ):
        raise _bad(f"{param}.value", f"must be a number or string for `{kind}`")
    return {"type": kind, "key": key, "value": value}


def matches(rule: dict[str, Any] | None, attributes: dict[str, Any]) -> bool:
    """Whether attributes pass a checked filter (no filter passes everything). An attribute that is
    missing, or of another type than the value, passes only `ne` and `nin`."""
    if rule is None:
        return True
    kind = rule["type"]
    if kind == "and":
        return all(matches(part, attributes) for part in rule["filters"])
    if kind == "or":
        return any(matches(part, attributes) for part in rule["filters"])
    have, want = attributes.get(rule["key"]), rule["value"]
    if kind in ("in", "nin"):
        found = have is not None and any(_same_kind(have, v) and have == v for v in want)
        return found if kind == "in" else not found
    if kind in ("eq", "ne"):
        equal = have is not None and _same_kind(have, want) and have == want
        return equal if kind == "eq" else not equal
    if have is None or not _same_kind(have, want):
        return False
    return bool({"gt": have > want, "gte": have >= want, "lt": have < want, "lte": have <= want}[kind])


def _same_kind(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return isinstance(a, str) == isinstance(b, str)


def _bad(param: str, what: str) -> InvalidRequestError:
    return InvalidRequestError(f"{param} {what}.", param=param, code="invalid_value")
