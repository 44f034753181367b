"""LFM2's and LFM2.5's calls (Liquid AI): text, or the calls as a Python list between `<|tool_call_start|>`
and `<|tool_call_end|>`, `[NAME(KEY=VALUE, …), …]`, each value a Python literal (a string in quotes, a
number, `True`, `False`, `None`, a list) or an object as JSON: what LFM2.5's template writes for a call given
back, and what the family was trained to write.

The grammar holds each call's arguments to their order in its tool's schema (the optional ones may be left
out) and each value to its type; the reader gives each call's name as its arguments open and each argument
as its value ends, made the JSON value its schema says it is (Python's literals and JSON's alike).
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

from modelport.protocol.validation import json_value
from modelport.service.generation.formats.call_lists import calls_or_text, listed
from modelport.service.generation.formats.json_calls import arguments_object
from modelport.service.generation.formats.keyed import KeyedReader, Quoting, StreamedString, keyed_function
from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import Delta, escaped, text_until
from modelport.service.generation.formats.xml_values import INTEGER, NUMBER, bounded, free_text
from modelport.service.generation.tools.plan import ToolPlan
from modelport.service.generation.tools.render import content_text

START, END = "<|tool_call_start|>", "<|tool_call_end|>"
# A Python string in either quotes, its line breaks escaped (so that it reads back as Python reads it).
_STRING = r"""/'([^'\\\n]|\\.)*'|"([^"\\\n]|\\.)*"/"""
_JSON_WORDS = re.compile(r"\b(true|false|null)\b")
_PYTHON_WORDS = {"true": "True", "false": "False", "null": "None"}


class Pythonic:
    """LFM2's call syntax. Its templates show a message's text and not its calls (LFM2.5's larger one writes
    them after the text), so a call given back is written into the text, as the model wrote it."""

    name = "lfm2"
    arguments = "arguments"

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of an answer that follows `plan`: the list of calls (one, or more where calls may go in
        parallel), or (unless one is required) text that does not begin like it."""

        def value(schema: dict[str, Any], name: str) -> str:
            return _value(schema, name, grammar, compact)

        functions = []
        for i, tool in enumerate(plan.tools):  # `NAME(`, the arguments in their schema's order, `)`
            keys = ((tool.get("parameters") or {}).get("properties") or {}).keys()
            functions.append(keyed_function(tool, i, grammar, keys, ("(", "=", ", ", ")"), value))
        function = grammar.rule("function", " | ".join(functions))
        calls = listed(plan, function, grammar.literal(", "))
        opening, closing = grammar.literal(f"{START}["), grammar.literal(f"]{END}")
        return calls_or_text(plan, grammar, grammar.rule("calls", f"{opening} {calls} {closing}"))

    def reader(self, plan: ToolPlan) -> PythonicReader:
        """A reader of one answer in this syntax."""
        return PythonicReader({tool["name"]: tool.get("parameters") or {} for tool in plan.tools})

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for message in messages:
            if message.get("role") == "assistant" and message.get("tool_calls"):
                said = f"{content_text(message.get('content'))}{written(message['tool_calls'])}"
                message = {k: v for k, v in message.items() if k != "tool_calls"} | {"content": said}
            out.append(message)
        return out


def written(calls: list[dict[str, Any]]) -> str:
    """Calls given back, as LFM2.5's template writes them: a string quoted, an object as JSON, anything else
    as Python writes it."""
    listed = []
    for call in calls:
        function = call.get("function") or {}
        arguments = arguments_object(function.get("arguments"))
        pairs = arguments.items() if isinstance(arguments, dict) else ()
        said = ", ".join(f"{key}={_python(value)}" for key, value in pairs)
        listed.append(f"{function.get('name', '')}({said})")
    return f"{START}[{', '.join(listed)}]{END}"


def _python(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)  # True, None, 3, ['a', 1]: as the template's `string` filter writes them


def _value(schema: dict[str, Any], name: str, grammar: Grammar, compact: bool) -> str:
    """The rule of an argument's value of `schema`, as Python writes it (an object, or anything under a
    constraint Python's literals cannot say, as JSON: Python reads it too)."""
    kind = schema.get("type")
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return "(" + " | ".join(grammar.literal(repr(v)) for v in schema["enum"]) + ")"
    if free_text(schema):
        return grammar.shared("string", lambda: grammar.rule("STRING", _STRING))
    if kind == "boolean":
        return '("True" | "False")'
    if kind == "null":
        return '"None"'
    if kind == "integer" and not bounded(schema):
        return grammar.shared("integer", lambda: grammar.rule("INTEGER", INTEGER))
    if kind == "number" and not bounded(schema):
        return grammar.shared("number", lambda: grammar.rule("NUMBER", NUMBER))
    return grammar.json(f"v_{name}", schema, compact)


def _json_of(text: str, schema: dict[str, Any]) -> str:
    """An argument's value as written (a Python literal, or JSON) as the JSON its schema says it is; text
    that is neither is a string."""
    text = text.strip()
    try:
        value = json_value(text)
    except ValueError:
        value = _literal(text)
    if schema.get("type") == "string" and not isinstance(value, str):
        value = text
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # a set, bytes, a tuple's kin: not JSON
        return json.dumps(text, ensure_ascii=False)


def _literal(text: str) -> Any:
    """A Python literal's value (JSON's `true`, `false` and `null` inside it read as Python's), or the text
    itself."""
    python = _outside_strings(text, lambda part: _JSON_WORDS.sub(lambda m: _PYTHON_WORDS[m.group()], part))
    try:
        with warnings.catch_warnings():  # a string's `\/` is Python's too, read as written: no warning
            warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
            return ast.literal_eval(python)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _outside_strings(text: str, change: Callable[[str], str]) -> str:
    """`text` with `change` applied to what lies outside its quoted strings."""
    out: list[str] = []
    start = at = 0
    while at < len(text):
        after = _QUOTING.string_at(text, at)
        if after == -1:
            at += 1
            continue
        end = len(text) if after is None else after
        out += [change(text[start:at]), text[at:end]]
        start = at = end
    return "".join([*out, change(text[start:])])


class _PythonQuoting(Quoting):
    """Python's strings, in either quote, with backslash escapes."""

    # What a string's reading stops at: an escape, or the quote that closes it.
    _STOPS: ClassVar[dict[str, re.Pattern[str]]] = {quote: re.compile(rf"[\\{quote}]") for quote in "'\""}

    def opens(self, text: str, at: int) -> int | None:
        return 1 if text[at] in "'\"" else 0

    def stops(self, quote: str) -> re.Pattern[str]:
        """What a string opened by `quote` is read up to: an escape, or its closing quote."""
        return self._STOPS[quote]

    def close(self, text: str, start: int, at: int) -> tuple[int | None, int]:
        stops = self.stops(text[start])
        while found := stops.search(text, at):
            at = found.start()
            if text[at] != "\\":
                return at + 1, at + 1
            if at + 1 == len(text):
                return None, at  # the escape's second character is yet to come
            at += 2
        return None, len(text)


_QUOTING = _PythonQuoting()


# The escapes Python and JSON read alike (a double-quoted string JSON can read is read as JSON), and `\'`.
_ALIKE = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class _PythonString(StreamedString):
    """A free-text argument's Python string, its text given out as it comes, its escapes read. From an
    escape Python and JSON do not read alike (`\\x41`, `\\u…`, `\\N{…}`, octal, `\\/`) on, nothing more goes
    out until the string's end, and then what the string read whole (`_json_of`) holds after what went out."""

    def __init__(self, quote: str, schema: dict[str, Any]) -> None:
        super().__init__(quote)
        self.schema = schema
        self._stops = _QUOTING.stops(quote)
        self._written: list[str] = []  # the string's text as written, so far
        self._given: list[str] = []  # its text given out, so far
        self._held: list[str] = []  # its text as written from the first escape not read alike on

    def take(self, pending: str) -> tuple[str, str, bool]:
        out: list[str] = []
        at = 0
        while found := self._stops.search(pending, at):
            stop = found.start()
            self._read(pending[at:stop], pending[at:stop], out)
            if pending[stop] == self.quote:
                return self._ended(out), pending[stop + 1 :], True
            if stop + 1 == len(pending):  # the escape's second character is yet to come
                return escaped("".join(out)), pending[stop:], False
            escape = pending[stop : stop + 2]
            alike = _ALIKE.get(escape[1])
            self._read(escape, alike if alike is not None and not self._held else None, out)
            at = stop + 2
        self._read(pending[at:], pending[at:], out)
        return escaped("".join(out)), "", False

    def end(self, held: str) -> str:
        out: list[str] = []
        self._read(held.rstrip("\\"), held.rstrip("\\"), out)
        return self._ended(out)

    def _read(self, written: str, text: str | None, out: list[str]) -> None:
        """Some of the string as `written`, and the `text` it stands for, given out now (None: held)."""
        self._written.append(written)
        if text is None or self._held:
            self._held.append(written)
        else:
            out.append(text)
            self._given.append(text)

    def _ended(self, out: list[str]) -> str:
        """The rest of the JSON string at the string's end: what was read now, and what the whole string
        reads as after what went out (as written, where the whole is no Python string: `\\N{NOPE}`)."""
        rest = ""
        if self._held:
            value = json.loads(_json_of(self.quote + "".join(self._written) + self.quote, self.schema))
            given = "".join(self._given)
            rest = value[len(given) :] if value.startswith(given) else "".join(self._held)
        return escaped("".join(out) + rest) + '"'


class PythonicReader(KeyedReader):
    """An answer in LFM2's syntax: text until `<|tool_call_start|>`, then `[`, the calls (`, ` between
    them), `]` and `<|tool_call_end|>`."""

    def _around(self) -> list[Delta]:
        pending = self.pending
        if self.state == "text":
            text, self.pending, opened = text_until(pending, START)
            if opened:
                self.state = "list"
            return [{"content": text}] if text else []
        stripped = pending.lstrip()
        if self.state == "list":
            if stripped.startswith("["):
                self.pending, self.state = stripped[1:], "name"
            elif stripped:
                self._stray(stripped)
        elif self.state == "closed":  # a call's arguments: another call, or the list's end
            if stripped.startswith(","):
                self.pending, self.state = stripped[1:], "name"
            elif stripped.startswith("]"):
                self.pending, self.state = stripped[1:], "ending"
            elif stripped:
                self._stray(stripped)
        elif stripped.startswith(END):  # ending: past the list, before its end marker (text may follow)
            self.pending, self.state = stripped[len(END) :], "text"
        elif stripped and not END.startswith(stripped):
            self.pending, self.state = stripped, "text"
        return []

    quoting = _QUOTING
    string_quotes = ("'", '"')

    def _streamed(self, quote: str, schema: dict[str, Any]) -> StreamedString:
        return _PythonString(quote, schema)

    _json_of = staticmethod(_json_of)
