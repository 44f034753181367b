"""The `openai` package's unions of models that carry a literal `type` (its tools, its tool choices), as
request fields pydantic tells apart by that `type`. The package's own unions are untagged for pydantic (its
`PropertyInfo` discriminator is its own), so pydantic would try every member and report the first one's
errors: a function tool choice without its `name` refused as "not 'none', 'auto' or 'required'"."""

from __future__ import annotations

import typing
from typing import Annotated, Any, Union

from pydantic import BaseModel, Discriminator, Tag

# The error of a value whose `type` no member has: its 400 names the value's `type` (`validation.invalid`).
UNKNOWN_TYPE = "unknown_type"
_PLAIN = "Plain"  # the tag of a member that is not a model (a tool choice's mode); a capital: no `param`


def _members(union: Any) -> tuple[Any, ...]:
    """The members of a union, or of an annotated one (`Annotated[Union[…], PropertyInfo(…)]`)."""
    members = typing.get_args(union)
    if members and typing.get_origin(members[0]) is Union:
        return typing.get_args(members[0])
    return members


def by_type(union: Any) -> dict[str, type[BaseModel]]:
    """The models of a union (or an annotated union) of the `openai` package's types, by the literal `type`
    each carries."""
    return {
        name: kind
        for kind in _members(union)
        if isinstance(kind, type) and issubclass(kind, BaseModel) and "type" in kind.model_fields
        for name in typing.get_args(kind.model_fields["type"].annotation)
        if isinstance(name, str)
    }


def tagged(union: Any, what: str) -> Any:
    """`union` told apart by `type` (its one member that is not a model, a literal, by being a string);
    `what` names a value of it in the 400 for a `type` none of its members has."""
    kinds = by_type(union)
    plain = [m for m in _members(union) if not (isinstance(m, type) and issubclass(m, BaseModel))]

    def member(given: Any) -> str | None:
        if isinstance(given, str) and plain:
            return _PLAIN
        kind = given.get("type") if isinstance(given, dict) else getattr(given, "type", None)
        found = kinds.get(kind) if isinstance(kind, str) else None
        return found.__name__ if found is not None else None

    members = [Annotated[m, Tag(_PLAIN)] for m in plain[:1]]
    members += [Annotated[kind, Tag(kind.__name__)] for kind in dict.fromkeys(kinds.values())]
    return Annotated[
        Union[tuple(members)],  # noqa: UP007 (a union of members known at run time)
        Discriminator(
            member,
            custom_error_type=UNKNOWN_TYPE,
            custom_error_message=f"{what} is an object whose `type` is one of {', '.join(sorted(kinds))}",
        ),
    ]
