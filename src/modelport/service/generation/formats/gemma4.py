"""Gemma 4's calls: text, or one `<|tool_call>call:NAME{KEY:VALUE,…}<tool_call|>` per call, as its template
writes a call given back: the keys bare and in sorted order, a string between `<|"|>` marks, a number, `true`,
`false` or `null` as JSON writes them, a list in brackets and an object in braces (its keys bare).

The grammar holds each call's arguments to their sorted order (the optional ones may be left out) and each
value to its type where the notation can say it (a string, its enum, a number, a boolean; a list or an object
is any value of the notation); the reader gives each call's name as its arguments open and each argument as
its value ends, made the JSON value it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

from modelport.service.generation.formats.keyed import KeyedReader, Quoting, keyed_function
from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import Delta, text_until
from modelport.service.generation.formats.xml_values import INTEGER, NUMBER, bounded, free_text, tagged_calls
from modelport.service.generation.tools.plan import ToolPlan

CALL, CALL_END, QUOTE = "<|tool_call>", "<tool_call|>", '<|"|>'
_HEAD = "call:"
_SCALAR = re.compile(r"[^,}\]]*")


class Gemma4:
    """Gemma 4's call syntax (its template writes the calls and results of the history itself)."""

    name = "gemma4"
    arguments = "arguments"

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of an answer that follows `plan`: its calls (one, or more where calls may go in
        parallel), or (unless one is required) text that does not begin like one."""

        def value(schema: dict[str, Any], name: str) -> str:
            return _value(schema, name, grammar)

        functions = []
        for i, tool in enumerate(plan.tools):  # `NAME{`, the arguments in their keys' sorted order, `}`
            keys = sorted((tool.get("parameters") or {}).get("properties") or {})
            functions.append(keyed_function(tool, i, grammar, keys, ("{", ":", ",", "}"), value))
        return tagged_calls(plan, grammar, functions, (CALL + _HEAD, CALL_END), "")

    def reader(self, plan: ToolPlan) -> Gemma4Reader:
        """A reader of one answer in this syntax."""
        return Gemma4Reader({tool["name"]: tool.get("parameters") or {} for tool in plan.tools})

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages


def _value(schema: dict[str, Any], name: str, grammar: Grammar) -> str:
    """The rule of an argument's value of `schema` (`name`: its rule's)."""
    kind = schema.get("type")
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return "(" + " | ".join(grammar.literal(f"{QUOTE}{v}{QUOTE}") for v in schema["enum"]) + ")"
    if free_text(schema):
        return _string(grammar)
    if kind == "boolean":
        return '("true" | "false")'
    if kind == "null":
        return '"null"'
    if kind in ("integer", "number") and bounded(schema):  # JSON's numbers are the notation's
        return grammar.json(f"v_{name}", schema)
    if kind == "integer":
        return grammar.shared("integer", lambda: grammar.rule("INTEGER", INTEGER))
    if kind == "number":
        return _number_rule(grammar)
    return grammar.shared("value", lambda: _any(grammar))


def _string(grammar: Grammar) -> str:
    return grammar.shared(
        "string", lambda: grammar.rule("string", f"{grammar.literal(QUOTE)} {grammar.until('text', QUOTE)}")
    )


def _number_rule(grammar: Grammar) -> str:
    return grammar.shared("number", lambda: grammar.rule("NUMBER", NUMBER))


def _any(grammar: Grammar) -> str:
    """Any value of the notation: a string, a number, `true`, `false`, `null`, a list, an object."""
    string, number = _string(grammar), _number_rule(grammar)
    key = grammar.rule("KEY", r"/[A-Za-z_][\w.\-]*/")
    member = grammar.rule("member", f'({key} | {string}) ":" value')
    listed = grammar.rule("list", '"[" (value ("," value)*)? "]"')
    mapped = grammar.rule("object", f'"{{" ({member} ("," {member})*)? "}}"')
    return grammar.rule("value", f'{string} | {number} | "true" | "false" | "null" | {listed} | {mapped}')


def _json_of(text: str, schema: dict[str, Any]) -> str:
    """An argument's value as written, as the JSON value it is (text that does not parse is a string)."""
    text = text.strip()
    try:
        value, end = _parse(text, 0)
        if end != len(text):
            raise ValueError(text)
    except (ValueError, IndexError, RecursionError):  # RecursionError: nested past Python's stack
        value = text
    if schema.get("type") == "string" and not isinstance(value, str):
        value = text
    return json.dumps(value, ensure_ascii=False)


def _parse(text: str, at: int) -> tuple[Any, int]:
    """The value written at `at` in Gemma's notation, and where it ends."""
    while text[at].isspace():
        at += 1
    if text.startswith(QUOTE, at):
        end = text.index(QUOTE, at + len(QUOTE))
        return text[at + len(QUOTE) : end], end + len(QUOTE)
    if text[at] in "[{":
        closing = "]" if text[at] == "[" else "}"
        items: list[Any] = []
        members: dict[str, Any] = {}
        at += 1
        while True:
            while text[at].isspace() or text[at] == ",":
                at += 1
            if text[at] == closing:
                return (items if closing == "]" else members), at + 1
            if closing == "]":
                item, at = _parse(text, at)
                items.append(item)
                continue
            if text.startswith(QUOTE, at):
                key, at = _parse(text, at)
            else:
                colon = text.index(":", at)
                key, at = text[at:colon].strip(), colon
            if text[at] != ":":
                raise ValueError(text)
            members[str(key)], at = _parse(text, at + 1)
    scalar = _SCALAR.match(text, at)
    assert scalar is not None  # it matches the empty text at least
    word = scalar.group().strip()
    if not word:
        raise ValueError(text)
    return json.loads(word) if word in ("true", "false", "null") or _number(word) else word, scalar.end()


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


class _Gemma4Quoting(Quoting):
    """Gemma 4's strings: between `<|"|>` marks, with no escapes."""

    def opens(self, text: str, at: int) -> int | None:
        if text.startswith(QUOTE, at):
            return len(QUOTE)
        return None if QUOTE.startswith(text[at:]) else 0

    def close(self, text: str, start: int, at: int) -> tuple[int | None, int]:
        end = text.find(QUOTE, at)
        if end >= 0:
            return end + len(QUOTE), end + len(QUOTE)
        return None, max(at, len(text) - len(QUOTE) + 1)  # the marker may have begun


class Gemma4Reader(KeyedReader):
    """An answer in Gemma 4's syntax: text until `<|tool_call>`, then `call:` and the call, `<tool_call|>`;
    more calls, or text."""

    opens, closes, assigns = "{", "}", ":"

    def _around(self) -> list[Delta]:
        pending = self.pending
        if self.state == "text":
            text, self.pending, opened = text_until(pending, CALL)
            if opened:
                self.state = "head"
            return [{"content": text}] if text else []
        if self.state == "head":
            if pending.startswith(_HEAD):
                self.pending, self.state = pending[len(_HEAD) :], "name"
            elif not _HEAD.startswith(pending):
                self._stray(pending)
            return []
        stripped = pending.lstrip()  # closed: past the arguments, before the call's end marker
        if stripped.startswith(CALL_END):
            self.pending, self.state = stripped[len(CALL_END) :], "text"
        elif stripped and not CALL_END.startswith(stripped):
            self.pending, self.state = stripped, "text"
        return []

    quoting = _Gemma4Quoting()
    string_quotes = (QUOTE,)
    _json_of = staticmethod(_json_of)
