"""A Lark grammar with no recursion, as one regular expression.

A custom tool's input may be held to a Lark grammar (Codex's `apply_patch` is one). A tool call's input
travels inside the model's call syntax as a JSON string, and the decoder holds a JSON string to a regular
expression (`pattern`), escaping it as JSON does; a grammar whose rules never reach themselves is a regular
language, so it is written out as one here: its rules inlined, its literals escaped, its regexes kept. A
grammar that recurses, or uses what a regex cannot say (`%ignore`, templates), gives None: its input is then
free text, and the caller says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# `%import common.NAME`: Lark's common terminals a grammar may import, as regexes.
_COMMON = {
    "LF": r"\n", "CR": r"\r", "NEWLINE": r"(\r?\n)+", "WS": r"[ \t\f\r\n]+", "WS_INLINE": r"[ \t]+",
    "DIGIT": r"[0-9]", "HEXDIGIT": r"[a-fA-F0-9]", "INT": r"[0-9]+", "SIGNED_INT": r"[+-]?[0-9]+",
    "LETTER": r"[a-zA-Z]", "LCASE_LETTER": r"[a-z]", "UCASE_LETTER": r"[A-Z]", "WORD": r"[a-zA-Z]+",
    "CNAME": r"[a-zA-Z_][a-zA-Z0-9_]*", "ESCAPED_STRING": r'"([^"\\]|\\.)*"',
    "NUMBER": r"[0-9]+(\.[0-9]+)?", "DECIMAL": r"[0-9]+\.[0-9]*|\.[0-9]+",
}  # fmt: skip
_TOKEN = re.compile(
    r"""(?P<space>[ \t]+|//[^\n]*)|(?P<newline>\r?\n)|(?P<string>"(?:[^"\\\n]|\\.)*"i?)"""
    r"""|(?P<regex>/(?:[^/\\\n]|\\.)+/[imslux]*)|(?P<arrow>->)|(?P<name>[?!]?[A-Za-z_][A-Za-z0-9_]*(\.\d+)?)"""
    r"""|(?P<range>~\s*\d+(\s*\.\.\s*\d+)?)|(?P<punct>[:|()\[\]+*?])|(?P<directive>%[a-z]+[^\n]*)"""
)
_META = set("\\^$.|?*+()[]{}/")


class _NotRegular(Exception):
    """The grammar is not one regex can say."""


@dataclass
class _Definitions:
    rules: dict[str, list[list[str]]]  # name → its tokens (alternatives kept as `|` tokens)
    imported: dict[str, str]


def to_regex(definition: str) -> str | None:
    """The regex (anchored) that matches what the grammar's `start` rule matches; None when the grammar is
    not regular or uses what this reading does not know."""
    try:
        definitions = _read(definition)
        if "start" not in definitions.rules:
            return None
        return f"^({_expand('start', definitions, ())})$"
    except _NotRegular:
        return None


def _read(text: str) -> _Definitions:
    """The rules and terminals of a grammar, each as its list of tokens."""
    rules: dict[str, list[list[str]]] = {}
    imported: dict[str, str] = {}
    current: list[str] | None = None
    at_line_start = True
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise _NotRegular
        position = match.end()
        kind, value = match.lastgroup, match.group()
        if kind == "space":
            at_line_start = False
            continue
        if kind == "newline":
            at_line_start = True
            continue
        if kind == "directive":
            parts = value.split()
            if parts[0] != "%import" or len(parts) < 2:
                raise _NotRegular  # %ignore, %declare, %override: not regex matters
            module, _, names = parts[1].partition(".")
            for name in (names or module).strip("()").split(","):
                name = name.strip()
                if module != "common" or name not in _COMMON:
                    raise _NotRegular
                imported[name] = _COMMON[name]
            current = None
            continue
        if at_line_start and kind == "name":
            after = _TOKEN.match(text, position)
            while after is not None and after.lastgroup == "space":
                after = _TOKEN.match(text, after.end())
            if after is not None and after.group() == ":":
                name = value.lstrip("?!").split(".")[0]
                current = []
                rules.setdefault(name, []).append(current)
                position = after.end()
                at_line_start = False
                continue
        at_line_start = False
        if current is None:
            raise _NotRegular
        current.append(value)
    return _Definitions(rules, imported)


def _expand(name: str, definitions: _Definitions, seen: tuple[str, ...]) -> str:
    if name in seen:
        raise _NotRegular  # a rule that reaches itself: not a regular language
    if name in definitions.imported:
        return definitions.imported[name]
    if name not in definitions.rules:
        raise _NotRegular
    alternatives = [_sequence(tokens, definitions, (*seen, name)) for tokens in definitions.rules[name]]
    return "|".join(alternatives)


def _sequence(tokens: list[str], definitions: _Definitions, seen: tuple[str, ...]) -> str:
    """A rule's body as a regex: alternatives at this level joined by `|`, each a run of items."""
    out: list[str] = []
    stack: list[tuple[list[str], str]] = []  # open groups: what came before, and their closing bracket
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "->":
            i += 2  # an alias names the tree's node; the text is the same
            continue
        if token in ("(", "["):
            stack.append((out, ")" if token == "(" else "]"))
            out = []
        elif token in (")", "]"):
            if not stack or stack[-1][1] != token:
                raise _NotRegular
            inner, out = "".join(out), stack.pop()[0]
            out.append(f"({inner})" + ("?" if token == "]" else ""))
        elif token == "|":
            out.append("|")
        elif token in ("+", "*", "?"):
            if not out or out[-1] == "|":
                raise _NotRegular
            out[-1] = f"({out[-1]}){token}"
        elif token.startswith("~"):
            if not out or out[-1] == "|":
                raise _NotRegular
            low, _, high = token[1:].replace(" ", "").partition("..")
            out[-1] = f"({out[-1]}){{{low},{high or low}}}"
        elif token.startswith('"'):
            literal = _literal(token[: token.rindex('"') + 1])
            out.append(_insensitive(literal) if token.endswith("i") else f"({_escaped(literal)})")
        elif token.startswith("/"):
            if not token.endswith("/"):
                raise _NotRegular  # flags would need the regex rewritten (its classes, its dots)
            out.append(f"({token[1:-1]})")
        else:
            out.append(f"({_expand(token.lstrip('?!').split('.')[0], definitions, seen)})")
        i += 1
    if stack:
        raise _NotRegular
    return "".join(out)


def _escaped(literal: str) -> str:
    return "".join(f"\\{c}" if c in _META else _control(c) for c in literal)


def _control(c: str) -> str:
    return {"\n": r"\n", "\r": r"\r", "\t": r"\t"}.get(c, c)


def _insensitive(literal: str) -> str:
    return "(" + "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else _escaped(c) for c in literal) + ")"


def _literal(quoted: str) -> str:
    """A Lark string's text (its escapes are JSON's, but for an escaped slash)."""
    try:
        text = json.loads(quoted.replace("\\/", "/"))
    except json.JSONDecodeError:
        raise _NotRegular from None
    assert isinstance(text, str)
    return text
