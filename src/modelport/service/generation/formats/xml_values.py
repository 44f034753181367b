"""What the call syntaxes that write each argument as text between tags share (Qwen3-Coder's
`<parameter=K>`, GLM's `<arg_value>`): the grammar of an answer of calls in tags and of one call's arguments,
and the reading back of an argument. A value is a string as it is, a number or a boolean as JSON writes it,
an object or a list as JSON; its grammar holds it to its schema's type, and read back it is made the JSON
value its schema says it is. LFM2's calls (`pythonic`) and Gemma 4's hold their numbers and free text by the
same rules and their arguments in order as `in_order` writes it; Gemma 4's calls are tagged calls too."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from modelport.protocol.validation import json_value
from modelport.service.generation.formats.call_lists import calls_or_text, listed
from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import argument_head, escaped, until
from modelport.service.generation.tools.plan import ToolPlan

_ANY_TEXT = "/(.|\\n)+/"
# Bounded: a model that does not know the format could write digits to the end of its tokens, where the
# closing that follows a number is never forced (SmolLM2's weights under MiniMax M3's template wrote 300
# ones).
NUMBER = "/-?(0|[1-9][0-9]{0,23})(\\.[0-9]{1,24})?([eE][-+]?[0-9]{1,3})?/"
INTEGER = "/-?(0|[1-9][0-9]{0,23})/"


def tagged_calls(
    plan: ToolPlan, grammar: Grammar, functions: list[str], tags: tuple[str, str], between: str
) -> str:
    """The rule of an answer of calls in tags: a block a call (the opening tag, one of `functions`, the
    closing tag), `between` the blocks of parallel calls; or, unless a call is required, text that does not
    begin like one."""
    function = grammar.rule("function", " | ".join(functions))
    block = grammar.rule("block", f"{grammar.literal(tags[0])} {function} {grammar.literal(tags[1])}")
    return calls_or_text(plan, grammar, grammar.rule("calls", listed(plan, block, between)))


def tagged_function(
    tool: dict[str, Any],
    i: int,
    grammar: Grammar,
    compact: bool,
    head: str,
    opening: Callable[[str], str],
    ending: str,
    after: str = "",
    until: str | None = None,
) -> str:
    """The rule of a call of the `i`th tool: `head` (its name, as the syntax writes it), then each argument in
    its schema's order (the optional ones may be left out): `opening(key)`, its value held to its type (free
    text ends lazily at the first `ending`; where `ending` begins with a marker named by its tokens, `until`,
    it holds none of that marker), `ending`, and `after`."""
    parameters = tool.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    parts = [head]
    marker = until
    for key, schema in properties.items():
        typed = schema if isinstance(schema, dict) else {}
        if free_text(typed) and marker is not None:
            text = grammar.shared(f"until {marker}", lambda: grammar.text_lexeme("VALUE", marker))
            value = f"{text} {grammar.literal(ending)}"
        elif free_text(typed):  # its lexeme ends lazily at the first closing tag, which it includes
            value = grammar.rule(f"v_t{i}_{rule_name(key)}", _ANY_TEXT, suffix=ending)
        else:
            held = _value_rule(typed, f"t{i}_{rule_name(key)}", grammar, compact)
            value = f"{held} {grammar.literal(ending)}"
        rule = grammar.rule(f"p{i}_{rule_name(key)}", f"{opening(key)} {value} {after}".rstrip())
        parts.append(rule if key in required else f"{rule}?")
    return grammar.rule(f"f{i}", " ".join(parts))


def in_order(arguments: list[tuple[str, bool]], between: str) -> str:
    """The expression of `arguments` (each a rule, and whether it is required) in their order, `between`
    (a rule, or quoted text) separating them, the optional ones free to be left out (the syntaxes that
    separate their arguments: LFM2's, Gemma 4's)."""
    if not arguments:
        return ""
    (first, needed), rest = arguments[0], arguments[1:]
    after = " ".join(f"({between} {rule}){'' if need else '?'}" for rule, need in rest)
    taken = f"{first} {after}".strip()
    if needed:
        return taken
    skipped = in_order(rest, between)
    return f"({taken} | {skipped})" if skipped else f"({taken})?"


def argument_piece(
    parameters: dict[str, Any],
    key: str,
    value: str,
    first: bool,
    as_json: Callable[[str, dict[str, Any]], str] | None = None,
) -> str:
    """An argument read back, as the piece of its call's JSON arguments it makes (`{"key": value` first,
    `, "key": value` after), its value the JSON its schema (among the tool's `parameters`) says it is: read
    by `as_json` (the value's text and its schema), the XML syntaxes' reading (text as it is) unless told."""
    return argument_head(key, first) + (as_json or _as_schema_type)(value, parameter_schema(parameters, key))


CDATA = ("<![CDATA[", "]]>")  # MiniCPM5's wrapper of a string with `<`, `&` or a line break in it


class ArgumentText:
    """One argument's value, read up to its closing tag (`marker`) and given out as the JSON value it is, as
    it comes: a free-text value's JSON string as its text comes (its opening quote once its beginning is
    known, its text escaped, its closing quote at the tag), as OpenAI streams a call's arguments; any other
    value whole at its tag (a number, an object, a string the grammar held to JSON: one beginning with `"`),
    made the JSON its schema says it is. Held back until what follows says whose they are: what may begin
    the tag, the line breaks the syntax trims around a value (`trims` at each end; None: every one), a CDATA
    section's marks (`cdata`). Read whole, a value that opens a CDATA section and never closes it keeps its
    opening; streamed, it has gone out without it. `as_json` is the syntax's reading of a value read whole;
    `quoted`, whether a string beginning with `"` may be one the grammar held to JSON (not in a syntax that
    writes every string as it is)."""

    def __init__(
        self,
        marker: str,
        schema: dict[str, Any],
        trims: int | None = 0,
        cdata: bool = False,
        as_json: Callable[[str, dict[str, Any]], str] | None = None,
        quoted: bool = True,
    ) -> None:
        self.marker, self.schema, self.trims, self.cdata = marker, schema, trims, cdata
        self.as_json, self.quoted = as_json or _as_schema_type, quoted
        self.mode = "start" if free_text(schema) else "whole"  # start, text (streamed) or whole
        self.opened = False  # its key has gone out (the reader's part)
        self._read: list[str] = []  # its raw text so far, while it is read whole or its beginning is unknown
        self._held = ""  # streamed: the end of what is read that is not yet given out
        self._in_cdata = False

    def take(self, pending: str) -> tuple[str, str, bool]:
        """What of the value's JSON to give out now, what is left to read after it, and whether it closed."""
        said, rest, closed = until(pending, self.marker)
        if self.mode == "text":
            return self._text(self._held + said, closed), rest, closed
        self._read.append(said)
        if self.mode == "start":
            body = self._lead("".join(self._read))
            opening = self.cdata and len(body) < len(CDATA[0]) and CDATA[0].startswith(body)
            if body and not opening and not (self.quoted and body.startswith('"')):
                self.mode, self._read = "text", []
                if self.cdata and body.startswith(CDATA[0]):
                    self._in_cdata, body = True, body[len(CDATA[0]) :]
                return '"' + self._text(body, closed), rest, closed
            if body and not opening:
                self.mode = "whole"
        if not closed:
            return "", rest, False
        return self.as_json(self._whole("".join(self._read)), self.schema), rest, True

    def end(self, pending: str) -> str:
        """The end of the value's JSON where the answer ends within it (unclosed, `pending` the last of it
        held back as what might have begun the tag): a streamed string's held text and closing quote; nothing
        of a value read whole (its text may be cut anywhere)."""
        return self._text(self._held + pending, True) if self.mode == "text" else ""

    def _lead(self, raw: str) -> str:
        """`raw` less the line breaks the syntax trims before a value."""
        breaks = len(raw) - len(raw.lstrip("\n"))
        return raw[breaks if self.trims is None else min(breaks, self.trims) :]

    def _trail(self, text: str) -> int:
        """How many line breaks at the end of `text` the syntax would trim after a value."""
        breaks = len(text) - len(text.rstrip("\n"))
        return breaks if self.trims is None else min(breaks, self.trims)

    def _whole(self, raw: str) -> str:
        """A value read whole, as the syntax reads it: its line breaks trimmed, a CDATA section unwrapped."""
        value = self._lead(raw)
        value = value[: len(value) - self._trail(value)]
        if self.cdata and value.startswith(CDATA[0]) and value.endswith(CDATA[1]):
            value = value[len(CDATA[0]) : len(value) - len(CDATA[1])]
        return value

    def _text(self, text: str, closed: bool) -> str:
        """Streamed text's JSON: at the close, all of it (less what the syntax trims at its end) and the
        closing quote; before, all but the end that may yet be the syntax's."""
        held = self._trail(text)
        if self._in_cdata:  # a section's end, whole or begun, before those line breaks
            body = text[: len(text) - held]
            held += next((n for n in (3, 2, 1) if body.endswith(CDATA[1][:n])), 0) if not closed else 0
            if closed and body.endswith(CDATA[1]):
                held += len(CDATA[1])
        self._held = "" if closed else text[len(text) - held :]
        given = escaped(text[: len(text) - held])
        return given + '"' if closed else given


def parameter_schema(parameters: dict[str, Any] | None, key: str) -> dict[str, Any]:
    """A parameter's schema among a tool's `parameters` ({} where it has none)."""
    schema = ((parameters or {}).get("properties") or {}).get(key)
    return schema if isinstance(schema, dict) else {}


def bounded(schema: dict[str, Any]) -> bool:
    """Whether a number's schema holds it to what a regex of its digits cannot say (bounds, a multiple):
    JSON's grammar holds it then."""
    return bool({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"} & schema.keys())


def free_text(schema: dict[str, Any]) -> bool:
    """Whether a parameter's value is any text (a string under no constraint)."""
    constrained = {"pattern", "format", "minLength", "maxLength", "enum", "const"} & schema.keys()
    return schema.get("type") == "string" and not constrained


def _value_rule(schema: dict[str, Any], name: str, grammar: Grammar, compact: bool) -> str:
    """The rule of a value of `schema` that is not free text (the text before its closing tag)."""
    kind = schema.get("type")
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return "(" + " | ".join(grammar.literal(v) for v in schema["enum"]) + ")"
    if kind == "integer" and not bounded(schema):
        return grammar.rule(f"V_{name}", INTEGER)
    if kind == "number" and not bounded(schema):
        return grammar.rule(f"V_{name}", NUMBER)
    if kind == "boolean":
        return '("true" | "false")'
    return grammar.json(f"v_{name}", schema, compact)  # objects, lists, and strings under constraints


def rule_name(key: str) -> str:
    """A parameter's name as it may be part of a rule's."""
    return "".join(c if c.isalnum() else "_" for c in key).lower() or "p"


def _as_schema_type(value: str, schema: dict[str, Any]) -> str:
    """A parameter's text as the JSON value its schema says it is (text where it does not parse)."""
    if schema.get("type") == "string":
        if value.startswith('"'):  # a string the grammar held to JSON (under a pattern or a format)
            try:
                return json.dumps(str(json.loads(value)), ensure_ascii=False)
            except json.JSONDecodeError:
                pass
        return json.dumps(value, ensure_ascii=False)
    try:
        return json.dumps(json_value(value), ensure_ascii=False, separators=(", ", ": "))
    except ValueError:
        return json.dumps(value, ensure_ascii=False)
