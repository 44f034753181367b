"""Request bodies validated anywhere (a route, the in-process client, a batch's line) fail the same way: a
400 naming the parameter as OpenAI names it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from modelport.errors import InvalidRequestError
from modelport.protocol.tagged_unions import UNKNOWN_TYPE

R = TypeVar("R", bound=BaseModel)


# How deep a request's JSON may nest: far deeper than any API asks for (a structured output's schema is 10
# levels at most at OpenAI, some 25 of JSON), and far less than where walking it would exhaust Python's
# recursion or pydantic's (a tool's schema of 250 levels once made a 500, and a Responses `text.format`
# of 300 a dropped connection).
MAX_DEPTH = 128


def parse(cls: type[R], body: Any) -> R:
    """`body` validated as a `cls`, or a 400 naming the first parameter at fault."""
    check_json(body)
    try:
        return cls.model_validate(body)
    except ValidationError as error:
        raise invalid(telling(error.errors())) from None


def check_json(body: Any) -> None:
    """A 400 for JSON nested deeper than `MAX_DEPTH` (walked without recursion, as it is not yet trusted), or
    holding a string that is no Unicode text: half a UTF-16 surrogate pair (`"\\ud800"` is valid JSON, and
    Python reads it as a lone surrogate), which no database, tokenizer or JSON answer can encode, so that
    each failed late with a 500 of its own."""
    nested: list[tuple[Any, int]] = [(body, 1)]
    while nested:
        value, depth = nested.pop()
        if isinstance(value, dict):
            children: Any = value.values()
            if not all(map(_is_text, value)):
                raise _not_text(body)
        else:
            children = value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= MAX_DEPTH:
                    raise too_deep()
                nested.append((child, depth + 1))
            elif isinstance(child, str) and not _is_text(child):
                raise _not_text(body)
    if isinstance(body, str) and not _is_text(body):
        raise _not_text(body)


def json_value(text: str | bytes) -> Any:
    """A string a client or a model wrote, read as JSON by Python's reader; a ValueError where it is none,
    JSON nested past the reader's stack among them (where `json` raises a RecursionError, which reading a
    string is not expected to, and which would have been a 500)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested past the reader's depth") from None


def too_deep() -> InvalidRequestError:
    """The 400 for JSON nested deeper than `MAX_DEPTH`."""
    message = f"The request nests its JSON deeper than {MAX_DEPTH} levels."
    return InvalidRequestError(message, code="invalid_value")


def _is_text(value: object) -> bool:
    """Whether a string (or a key, which may be anything in a Python body) encodes as UTF-8."""
    if not isinstance(value, str) or value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _not_text(body: Any) -> InvalidRequestError:
    """The 400 for a lone surrogate, naming where it is (looked for again: only a refused body pays this)."""
    where: list[tuple[Any, str]] = [(body, "")]
    while where:
        value, path = where.pop()
        items: Any = value.items() if isinstance(value, dict) else ()
        items = enumerate(value) if isinstance(value, list) else items
        for key, child in items:
            place = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)
            if not _is_text(key) or (isinstance(child, str) and not _is_text(child)):
                return _not_text_at((place if _is_text(key) else path) or None)  # a key: its object's place
            where.append((child, place))
    return _not_text_at(None)


def _not_text_at(param: str | None) -> InvalidRequestError:
    where = f"Invalid value for '{param}': a string" if param else "The request"
    return InvalidRequestError(
        f"{where} holds half of a UTF-16 surrogate pair (such as \\ud800 alone): no Unicode character.",
        param=param,
        code="invalid_value",
    )


def telling(errors: Sequence[Any]) -> dict[str, Any]:
    """Of pydantic's errors, the one that says what is wrong. Within a union it tries each member of, the
    first error of a member whose `type` the value has (the others' say only that it is not them), or, when
    no member has it, that the `type` is wrong."""
    wrong = [e for e in errors if e["type"] == "literal_error" and e["loc"][-1:] == ("type",)]
    others = {tuple(e["loc"][:-1]) for e in wrong}
    for error in errors:
        if not any(tuple(error["loc"][: len(loc)]) == loc for loc in others):
            return dict(error)
    return dict(wrong[0] if wrong else errors[0])


def invalid(error: dict[str, Any], within: str | None = None) -> InvalidRequestError:
    """The 400 for the first of pydantic's errors (about a part of the request at `within`, if given)."""
    param = validation_param(error)
    if within is not None:
        param = f"{within}.{param}" if param else within
    kind = error.get("type")
    if kind == "json_invalid":
        return InvalidRequestError(f"We could not parse the JSON body of your request: {error.get('msg')}")
    if not param and kind in ("missing", "model_attributes_type", "model_type", "dict_type"):
        # The body as a whole: none, or not an object (a form, a list, JSON sent as text/plain).
        return InvalidRequestError(
            "We could not parse the JSON body of your request: it must be a JSON object, sent with "
            "Content-Type: application/json."
        )
    if kind == "missing":
        return InvalidRequestError(f"Missing required parameter: '{param}'.", param=param, code="missing")
    if kind == UNKNOWN_TYPE:  # a tagged union's member, by a `type` none of its members has
        param = f"{param}.type" if param else "type"
        return InvalidRequestError(
            f"Invalid value for '{param}': {error.get('msg')}.", param=param, code="invalid_value"
        )
    if kind == "extra_forbidden":
        return InvalidRequestError(f"Unknown field '{param}'.", param=param, code="unknown_field")
    code: str | None
    if kind == "literal_error":  # a value outside a set: OpenAI's code for it
        code = "invalid_value"
    elif isinstance(error.get("input"), int):
        code = _OPENAI_CODES.get(str(kind), kind)
    else:
        code = kind
    return InvalidRequestError(f"Invalid value for '{param}': {error.get('msg')}", param=param, code=code)


def check_as(
    kinds: dict[str, type[BaseModel]], value: dict[str, Any], where: str, required: bool = True
) -> None:
    """A 400 naming the field of `value` (the part of the request at `where`) that the model of its `type`
    in `kinds` refuses; nothing for a type not there. `required=False`: a field left out is the caller's
    to require (the server takes some a client leaves out where OpenAI would not)."""
    kind = kinds.get(str(value.get("type")))
    if kind is None:
        return
    try:
        kind.model_validate(value)
    except ValidationError as error:
        wrong = [e for e in error.errors() if required or e["type"] != "missing"]
        if wrong:
            raise invalid(telling(wrong), within=where) from None


# OpenAI's codes for a number out of its bounds.
_OPENAI_CODES = {
    "greater_than_equal": "integer_below_min_value",
    "greater_than": "integer_below_min_value",
    "less_than_equal": "integer_above_max_value",
    "less_than": "integer_above_max_value",
}


def validation_param(error: dict[str, Any]) -> str | None:
    """The request parameter a pydantic error is about, as OpenAI names it (`messages[0].role`)."""
    loc = [part for part in error.get("loc", ()) if part not in ("body", "form", "query", "path")]
    # pydantic adds the union member's type to the path (`str`, `list[str]`, `constrained-str`, a model's
    # class name such as `AudioPCM`); OpenAI's names have none, and none of theirs starts with a capital.
    loc = [
        part
        for part in loc
        if not (
            isinstance(part, str)
            and (
                "[" in part
                or part in ("str", "int", "float")
                or part.startswith("constrained-")  # a member with bounds: `constrained-str`
                or part[:1].isupper()
            )
        )
    ]
    param = ""
    for part in loc:
        param += f"[{part}]" if isinstance(part, int) else (f".{part}" if param else str(part))
    return param or None
