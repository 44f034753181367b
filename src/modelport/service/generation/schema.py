"""Which JSON schemas the decoder can enforce: anything else is refused up front, naming the part.

llama.cpp hands a schema to llguidance (as modelport's own grammars are), which compiles what it can
enforce and, where it cannot compile one, leaves the answer unconstrained without a word; a caller who asked
for `uniqueItems` would get output that parses but does not validate, one whose `pattern` has a look-ahead,
free text. llguidance's own compiler is asked first (what it implements, in its version, which is
llama.cpp's), and what it refuses is a 400 naming the part.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any

from llguidance import LLMatcher

from modelport.errors import InvalidRequestError

_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
_SCHEMA_MAPS = {"properties", "$defs", "definitions"}
_SCHEMA_LISTS = {"anyOf", "oneOf", "allOf", "prefixItems"}
_COUNTS = {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
_BOUNDS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
_UNIMPLEMENTED = re.compile(r"Unimplemented keys: (\[.*\])")
_UNKNOWN_FORMAT = re.compile(r"Unknown format: (.+)")
_WHERE = re.compile(r"^at \d+\(\d+\): ")  # where in the grammar llguidance's message says it went wrong


def enforced(schema: Any, where: str, param: str) -> Any:
    """`schema` as the decoder is given it (without what constrains nothing: `_without_trivia`); a 400
    naming its first part the decoder cannot enforce (a keyword llguidance does not implement, a string
    format it does not know, a `pattern` it cannot read), or saying why llguidance cannot compile it (a
    schema no value satisfies: `minLength` above `maxLength`)."""
    schema = _without_trivia(schema)
    _check(schema, where, param)
    return schema


def _without_trivia(schema: Any) -> Any:
    """`schema` without `propertyNames` that only says keys are strings (zod writes it for every record, and
    JSON's keys are strings): llguidance does not implement the keyword, so it would refuse the schema for
    a constraint that holds of any answer."""
    if not isinstance(schema, dict):
        return schema
    kept = {}
    for key, value in schema.items():
        if key == "propertyNames" and (value is True or _annotations_of_strings(value)):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            value = {name: _without_trivia(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            value = [_without_trivia(sub) for sub in value]
        elif key in ("items", "additionalProperties", "not"):
            value = _without_trivia(value)
        kept[key] = value
    return kept


def _annotations_of_strings(schema: Any) -> bool:
    """Whether `schema` holds every string: `{}`, or `{"type": "string"}` with a title or description."""
    return isinstance(schema, dict) and schema.get("type", "string") == "string" and set(schema) <= {
        "type", "title", "description"
    }  # fmt: skip


def _check(schema: Any, where: str, param: str) -> None:
    """Its shape here (with paths), then llguidance's verdict, mapped back to the keyword's path."""
    _check_shape(schema, where, param)
    said = _schema_warnings(json.dumps(schema))
    if not said:
        return
    if unimplemented := _UNIMPLEMENTED.match(said[0]):
        key = json.loads(unimplemented[1])[0]
        at = next(_places(schema, where, lambda k, _: k == key), where)
        raise InvalidRequestError(
            f"{at}: the keyword `{key}` cannot be enforced by the decoder; remove it.", param=param
        )
    if unknown := _UNKNOWN_FORMAT.match(said[0]):
        kind = unknown[1].strip()
        at = next(_places(schema, where, lambda k, v: k == "format" and v == kind), where)
        raise InvalidRequestError(f"{at}: the string format `{kind}` cannot be enforced.", param=param)
    reason = _WHERE.sub("", said[0]).removeprefix("failed to compile JSON schema: ")
    raise InvalidRequestError(f"{where} cannot be enforced: {reason.rstrip('. ')}.", param=param)


@functools.lru_cache(maxsize=256)  # an agent's every turn holds its answer to the same tools
def _schema_warnings(schema: str) -> tuple[str, ...]:
    """What llguidance says of a schema (given as JSON) it cannot compile whole: nothing where it can."""
    try:
        failed, said = LLMatcher.validate_grammar_with_warnings(LLMatcher.grammar_from_json_schema(schema))
    except BaseException as error:
        return (_panic(error),)
    return tuple(said) if failed else ()


def _panic(error: BaseException) -> str:
    """What to say of a panic of llguidance's Rust (pyo3's `PanicException`, a `BaseException`: in a
    request's task it would be no 400 but a 500), as its compiler raises on some malformed input (an error
    message cut inside a character); anything else is raised again."""
    if type(error).__name__ != "PanicException":
        raise error
    return f"llguidance cannot read it ({str(error).splitlines()[0][:200]})"


def _places(schema: Any, where: str, found: Any) -> Iterator[str]:
    """The paths of `schema`'s keywords for which `found(key, value)` holds, depth first."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if found(key, value):
                yield f"{where}.{key}"
            if isinstance(value, dict | list):
                yield from _places(value, f"{where}.{key}", found)
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            yield from _places(item, f"{where}[{i}]", found)


def _check_shape(schema: Any, where: str, param: str) -> None:
    """Raise a 400 naming the first part of `schema` that is no schema: not an object, an unknown type, a
    count or bound that is no number, `required` that is no list of names, a reference outside it, a
    `pattern` that is no regular expression llguidance reads (llguidance's compiler would refuse the rest
    without the path, and panics on some)."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise InvalidRequestError(f"{where} must be a JSON schema object.", param=param)
    for key, value in schema.items():
        at = f"{where}.{key}"
        if key == "pattern":
            _check_pattern(value, at, param)
        if key == "type":
            for kind in value if isinstance(value, list) else [value]:
                if not isinstance(kind, str) or kind not in _TYPES:
                    raise InvalidRequestError(f"{at}: unknown type `{json.dumps(kind)}`.", param=param)
        if key in _COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InvalidRequestError(f"{at} must be a whole number, 0 or more.", param=param)
        if key in _BOUNDS and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InvalidRequestError(f"{at} must be a number.", param=param)
        if key in ("format", "pattern") and not isinstance(value, str):
            raise InvalidRequestError(f"{at} must be a string.", param=param)
        if key == "required" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise InvalidRequestError(f"{at} must be a list of property names.", param=param)
        if key == "$ref" and not (isinstance(value, str) and value.startswith("#")):
            raise InvalidRequestError(f"{at}: only local references (`#/...`) can be resolved.", param=param)
        if key in _SCHEMA_MAPS:
            if not isinstance(value, dict):
                raise InvalidRequestError(f"{at} must be an object.", param=param)
            for name, sub in value.items():
                _check_shape(sub, f"{at}.{name}", param)
        elif key in _SCHEMA_LISTS:
            if not isinstance(value, list):
                raise InvalidRequestError(f"{at} must be a list of schemas.", param=param)
            for i, sub in enumerate(value):
                _check_shape(sub, f"{at}[{i}]", param)
        elif key in ("items", "additionalProperties") and not isinstance(value, bool):
            _check_shape(value, at, param)


def _check_pattern(pattern: Any, at: str, param: str) -> None:
    """A `pattern` the grammar can hold a string to: a regular expression llguidance compiles (no
    look-arounds, no back-references)."""
    if not isinstance(pattern, str):
        raise InvalidRequestError(f"{at} must be a string (a regular expression).", param=param)
    error = regex_error(pattern)
    if error:
        raise InvalidRequestError(f"{at}: the regular expression cannot be enforced: {error}", param=param)


def regex_error(pattern: str) -> str:
    """Why llguidance cannot hold a string to the regular expression `pattern` (a look-around, a
    back-reference, an unclosed group), or ''."""
    return _grammar_error(LLMatcher.grammar_from_regex(pattern))


def check_compiles(grammar: str, param: str) -> None:
    """Raise a 400 where llguidance cannot compile an llguidance grammar (a schema it cannot satisfy, say,
    `minLength` above `maxLength`): llama.cpp would decode unconstrained, and say nothing."""
    if grammar.startswith("%llguidance"):
        error = _grammar_error(LLMatcher.grammar_from_lark(grammar))
        if error:
            raise InvalidRequestError(f"The answer cannot be held to what was asked: {error}", param=param)


@functools.lru_cache(maxsize=256)  # an agent's every turn holds its answer to the same tools
def _grammar_error(grammar: str) -> str:
    """What llguidance says is wrong with a grammar (the reason it gives, without where), or ''."""
    try:
        said = LLMatcher.validate_grammar(grammar).strip()
    except BaseException as error:
        said = _panic(error)
    if not said:
        return ""
    reasons = [line.removeprefix("error:").strip() for line in said.splitlines() if line.startswith("error:")]
    reason = reasons[0] if reasons else _WHERE.sub("", said.splitlines()[0])
    return reason.rstrip(".") + "."


# JSON held to one layout: a space after `,` and `:`, nowhere else. Left free, a small model pads its JSON
# with newlines and indentation (SmolLM2 wrote `{\n\n"name"\n\n:` and spent 35–60 tokens on a call).
COMPACT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def json_grammar(schema: dict[str, Any]) -> str:
    """An llguidance grammar for JSON that validates against `schema`, laid out compactly. An object that
    does not say whether it takes other properties takes none (llama.cpp's own schema grammar does the
    same, and OpenAI's strict schemas demand it): left open, a small model keeps inventing keys."""
    return f"%llguidance {{}}\nstart: %json {json.dumps(compact(closed(schema)))}\n"


def closed(schema: Any) -> Any:
    """`schema` with `additionalProperties: false` on every object that lists properties and says nothing
    of others."""
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    shut = {key: closed(value) if key in _SUBSCHEMAS else value for key, value in schema.items()}
    for key in _SCHEMA_MAPS & shut.keys():
        if isinstance(shut[key], dict):
            shut[key] = {name: closed(sub) for name, sub in shut[key].items()}
    if "properties" in shut and "additionalProperties" not in shut:
        shut["additionalProperties"] = False
    return shut


_SUBSCHEMAS = {"items", "additionalProperties", *_SCHEMA_LISTS}


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with llguidance's compact layout, unless it sets its own."""
    return schema if "x-guidance" in schema else {**schema, "x-guidance": COMPACT}
