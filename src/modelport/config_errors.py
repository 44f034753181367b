"""A configuration's mistakes told as a user reads them: one line each, saying where it is and, for a name
the configuration does not have, the one it likely meant (pydantic's own text names its types and links its
documentation)."""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError


def explained(error: ValidationError, model: type[BaseModel], source: str) -> str:
    """`error`, from validating `model`, as a line a problem, each starting with `source`."""
    lines = []
    for problem in error.errors():
        loc = problem["loc"]
        place = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
        if problem["type"] == "extra_forbidden":
            inner = _model_at(model, loc[:-1])
            likely = meant(str(loc[-1]), inner.model_fields) if inner is not None else ""
            lines.append(f"{source}: `{place}` is not a setting{likely}")
        else:
            what = str(problem["msg"]).removeprefix("Value error, ")
            lines.append(f"{source}: {what}" if not place else f"{source}: `{place}`: {what}")
    return "\n".join(lines)


def meant(name: str, names: Iterable[str]) -> str:
    """` (did you mean `NAME`?)` for the one of `names` most like `name`, if one is."""
    close = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean `{close[0]}`?)" if close else ""


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model of the settings at `loc` within `model` (list indexes pass through)."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        inner = _model_in(field.annotation) if field is not None else None
        if inner is None:
            return None
        model = inner
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_model_in, typing.get_args(annotation)) if m is not None), None)
