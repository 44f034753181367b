"""What the syntaxes of calls written as a name and its arguments key by key share: LFM2's
`NAME(KEY=VALUE, …)` and Gemma 4's `NAME{KEY:VALUE,…}`. The grammar of a call (`keyed_function`); and its
reading: a call's name given as its arguments open, each argument as its value ends (made the JSON value it
is by the syntax; a free-text string of a syntax with no escapes, Gemma 4's, as its text comes), and the
arguments' object closed as they do; what does not follow the syntax is text from there on. Each syntax
reads what lies around its calls (`_around`) and says where a value ends and what JSON it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import (
    ArgumentsReader,
    Delta,
    arguments_delta,
    call_delta,
    escaped,
    until,
)
from modelport.service.generation.formats.xml_values import (
    argument_piece,
    free_text,
    in_order,
    parameter_schema,
    rule_name,
)

_NAME = r"[A-Za-z_][\w.\-]*"


def keyed_function(
    tool: dict[str, Any],
    i: int,
    grammar: Grammar,
    keys: Iterable[str],
    marks: tuple[str, str, str, str],
    value: Callable[[dict[str, Any], str], str],
) -> str:
    """The rule of a call of the `i`th tool: its name and what opens its arguments, each argument of `keys`
    (the optional ones free to be left out) as the key, what joins it to its value and `value(schema, name)`,
    what separates the arguments between them, and what closes them. `marks`: (opens, joins, separates,
    closes), as text."""
    opens, joins, separates, closes = marks
    parameters = tool.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    arguments = []
    for key in keys:
        schema = properties[key] if isinstance(properties[key], dict) else {}
        rule = f"p{i}_{rule_name(key)}"
        argument = grammar.rule(rule, f"{grammar.literal(key + joins)} {value(schema, rule)}")
        arguments.append((argument, key in required))
    inside = in_order(arguments, grammar.literal(separates))
    return grammar.rule(
        f"f{i}", f"{grammar.literal(tool['name'] + opens)} {inside} {grammar.literal(closes)}"
    )


class Quoting:
    """How a syntax quotes its strings: what opens one, and where it closes read on from where the last look
    stopped, so that a string as long as a file's text is read once rather than again with every piece that
    lengthens it (64,000 characters of LFM2's call, 4 a piece, were 41 s of the serving thread's time)."""

    def opens(self, text: str, at: int) -> int | None:
        """The length of the quote that opens a string at `at`: 0 where none does, None where the text ends
        before that can be told."""
        raise NotImplementedError

    def close(self, text: str, start: int, at: int) -> tuple[int | None, int]:
        """Where the string opened at `start` ends (past its closing quote), read from `at` on (past its
        opening quote, never inside an escape); or None, and where to read on from when more comes."""
        raise NotImplementedError

    def string_at(self, text: str, at: int) -> int | None:
        """Where a string that begins at `at` ends (None: not yet; -1: none begins there)."""
        opened = self.opens(text, at)
        if not opened:
            return -1 if opened == 0 else None
        return self.close(text, at, at + opened)[0]


class ValueScan:
    """Where a value written at the start of a growing text ends (at the `,` or `closes` after it, outside
    its strings and brackets), each look reading on from where the last one stopped."""

    def __init__(self, closes: str, quoting: Quoting) -> None:
        self.closes, self.quoting = closes, quoting
        self.at = self.depth = 0
        self.string: int | None = None  # where the string being read began

    def end(self, text: str) -> int | None:
        """Where the value ends in `text` (the last look's text, lengthened), or None if it has not yet."""
        while True:
            if self.string is not None:
                end, self.at = self.quoting.close(text, self.string, self.at)
                if end is None:
                    return None
                self.string = None
            if self.at >= len(text):
                return None
            opened = self.quoting.opens(text, self.at)
            if opened is None:
                return None
            if opened:
                self.string, self.at = self.at, self.at + opened
                continue
            char = text[self.at]
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                if self.depth == 0:
                    return self.at if char == self.closes else None
                self.depth -= 1
            elif char == "," and self.depth == 0:
                return self.at
            self.at += 1


class StreamedString:
    """A free-text argument's string given out as it comes, as the text of its JSON string: here one of a
    syntax whose strings hold no escapes, which ends at the quote that opened it."""

    def __init__(self, quote: str) -> None:
        self.quote = quote

    def take(self, pending: str) -> tuple[str, str, bool]:
        """What of the JSON string to give out now (its closing quote at the string's end), what is left to
        read after it, and whether the string has ended."""
        said, rest, closed = until(pending, self.quote)
        return escaped(said) + ('"' if closed else ""), rest, closed

    def end(self, held: str) -> str:
        """The rest of the JSON string where the answer ends within it: what was `held` back, closed."""
        return escaped(held) + '"'


class KeyedReader(ArgumentsReader):
    """One answer's calls: the states `name`, `arguments` and `value` are read here, the rest (`text`, and
    the syntax's own around its calls) by `_around`."""

    # What opens and closes a call's arguments, and what joins a key to its value.
    opens, closes, assigns = "(", ")", "="
    quoting: Quoting
    # The quotes that open a string whose text goes out as it comes (a free-text argument's), each read by
    # the syntax's `StreamedString` (`_streamed`). None given: every value goes out whole as it ends.
    string_quotes: tuple[str, ...] = ()

    def __init__(self, parameters: dict[str, dict[str, Any]]) -> None:
        super().__init__(parameters)
        self._name = re.compile(rf"\s*({_NAME}){re.escape(self.opens)}")
        self._key = re.compile(rf"({_NAME})\s*{re.escape(self.assigns)}")
        self._value = ValueScan(self.closes, self.quoting)  # the value being read
        self._string: StreamedString | None = None  # the free-text string being streamed

    def _around(self) -> list[Delta]:
        raise NotImplementedError

    @staticmethod
    def _json_of(text: str, schema: dict[str, Any]) -> str:
        """A value as written, as the JSON value it is under `schema`."""
        raise NotImplementedError

    def flush(self, cut: bool) -> list[Delta]:
        text, self.pending = self.pending, ""
        if self.state == "text":  # whitespace after the calls is not the model's answer
            return [{"content": text}] if text.strip() or (text and not self.calls) else []
        if self.state not in ("arguments", "value", "string") or cut:
            return []
        if self.state == "string":  # the answer ended within a streamed string: it is closed
            assert self._string is not None
            return [arguments_delta(self.calls - 1, self._string.end(text)), self.closed()]
        out = [self._argument(text)] if self.state == "value" and text.strip() else []
        return [*out, self.closed()]

    def _step(self) -> list[Delta]:
        pending = self.pending
        if self.state == "name":
            named = self._name.match(pending)
            if named:
                self.function, self.pending = named.group(1), pending[named.end() :]
                self.calls += 1
                self.state, self.written = "arguments", 0
                return [call_delta(self.calls - 1, self.function)]
            if not re.fullmatch(rf"\s*({_NAME})?", pending):
                self._stray(pending)
            return []
        if self.state == "arguments":
            stripped = pending.lstrip(" \n,")
            if stripped.startswith(self.closes):
                self.pending, self.state = stripped[1:], "closed"
                return [self.closed()]
            keyed = self._key.match(stripped)
            if keyed:
                self.key, self.pending, self.state = keyed.group(1), stripped[keyed.end() :], "value"
                self._value = ValueScan(self.closes, self.quoting)
            elif stripped and not re.fullmatch(rf"{_NAME}\s*", stripped):
                self._stray(stripped)
                return [self.closed()]
            else:
                self.pending = stripped
            return []
        if self.state == "string":
            assert self._string is not None
            piece, self.pending, closed = self._string.take(pending)
            if closed:
                self.state, self._string = "arguments", None
            return [arguments_delta(self.calls - 1, piece)] if piece else []
        if self.state == "value" and self.string_quotes and self._value.at == 0:
            stripped = pending.lstrip()
            schema = parameter_schema(self.parameters.get(self.function), self.key)
            quote = next((q for q in self.string_quotes if stripped.startswith(q)), None)
            if free_text(schema) and quote is not None:  # a free-text string: streamed
                self.pending, self.state = stripped[len(quote) :], "string"
                self._string = self._streamed(quote, schema)
                return [arguments_delta(self.calls - 1, self._opening('"'))]
            if free_text(schema) and (
                not stripped or any(q.startswith(stripped) for q in self.string_quotes)
            ):
                return []  # what the value begins with is not yet known
        if self.state == "value":
            end = self._value.end(pending)
            if end is None:
                return []
            self.pending, self.state = pending[end:], "arguments"
            return [self._argument(pending[:end])]
        return self._around()

    def _streamed(self, quote: str, schema: dict[str, Any]) -> StreamedString:
        """The reader of a free-text string opened by `quote`: one of a syntax with no escapes in its
        strings (Gemma 4's), unless the syntax says otherwise."""
        return StreamedString(quote)

    def _argument(self, value: str) -> Delta:
        parameters = self.parameters.get(self.function) or {}
        piece = argument_piece(parameters, self.key, value, not self.written, self._json_of)
        self.written += 1
        return arguments_delta(self.calls - 1, piece)

    def _stray(self, rest: str) -> None:
        """The answer left the syntax: what is left is text."""
        self.pending, self.state, self.strayed = rest, "text", True
