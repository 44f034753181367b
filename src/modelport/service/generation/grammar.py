"""GBNF grammars for vLLM's `guided_choice` and `guided_regex`, so the decoder enforces them.

The regular expression is read by Python's own parser (`re._parser`), so its syntax is exactly Python's;
constructs a grammar cannot express (look-arounds, back-references) are refused with a 400.
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from modelport.errors import InvalidRequestError

_CATEGORIES = {
    sre.CATEGORY_DIGIT: "0-9",
    sre.CATEGORY_SPACE: r" \t\n\r\x0B\x0C",
    sre.CATEGORY_WORD: "a-zA-Z0-9_",
}
_NOT_CATEGORIES = {
    sre.CATEGORY_NOT_DIGIT: "0-9",
    sre.CATEGORY_NOT_SPACE: r" \t\n\r\x0B\x0C",
    sre.CATEGORY_NOT_WORD: "a-zA-Z0-9_",
}


def choice_grammar(choices: Any) -> str:
    """A grammar whose only sentences are the given strings."""
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) and c for c in choices):
        raise InvalidRequestError(
            "guided_choice must be a non-empty list of non-empty strings.", param="guided_choice"
        )
    return "root ::= " + " | ".join(_literal(c) for c in choices)


def regex_grammar(pattern: Any) -> str:
    """A grammar that accepts exactly the strings the (Python) regular expression fully matches."""
    if not isinstance(pattern, str) or not pattern:
        raise InvalidRequestError("guided_regex must be a non-empty string.", param="guided_regex")
    try:
        parsed = sre_parse.parse(pattern)
    except re.error as error:
        raise InvalidRequestError(f"guided_regex does not compile: {error}.", param="guided_regex") from None
    return "root ::= " + _sequence(list(parsed), top=True)


def _sequence(items: list[tuple[Any, Any]], top: bool = False) -> str:
    parts = []
    for i, (op, arg) in enumerate(items):
        if op is sre.AT:
            at_edge = top and (
                (i == 0 and arg is sre.AT_BEGINNING) or (i == len(items) - 1 and arg is sre.AT_END)
            )
            if not at_edge:
                raise _unsupported("anchors inside the pattern")
            continue
        parts.append(_item(op, arg))
    return " ".join(parts) if parts else '""'


def _item(op: Any, arg: Any) -> str:
    if op is sre.LITERAL:
        return _literal(chr(arg))
    if op is sre.NOT_LITERAL:
        return f"[^{_class_char(chr(arg))}]"
    if op is sre.ANY:
        return "[^\\n]"
    if op is sre.IN:
        return _class(arg)
    if op is sre.SUBPATTERN:
        return f"({_sequence(list(arg[-1]))})"
    if op is sre.BRANCH:
        return "(" + " | ".join(_sequence(list(branch)) for branch in arg[1]) + ")"
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
        low, high, body = arg
        inner = f"({_sequence(list(body))})"
        if high is sre.MAXREPEAT:
            return f"{inner}{{{low},}}" if low > 1 else inner + ("*" if low == 0 else "+")
        return f"{inner}{{{low},{high}}}"
    if op is sre.ATOMIC_GROUP:
        return f"({_sequence(list(arg))})"
    raise _unsupported(str(op).lower())


def _class(items: list[tuple[Any, Any]]) -> str:
    negate = bool(items) and items[0][0] is sre.NEGATE
    body: list[str] = []
    for op, arg in items[1:] if negate else items:
        if op is sre.LITERAL:
            body.append(_class_char(chr(arg)))
        elif op is sre.RANGE:
            body.append(f"{_class_char(chr(arg[0]))}-{_class_char(chr(arg[1]))}")
        elif op is sre.CATEGORY and arg in _CATEGORIES:
            body.append(_CATEGORIES[arg])
        elif op is sre.CATEGORY and arg in _NOT_CATEGORIES and len(items) == 1:
            return f"[^{_NOT_CATEGORIES[arg]}]"
        else:
            raise _unsupported(f"{str(op).lower()} inside a character class")
    return f"[{'^' if negate else ''}{''.join(body)}]"


def _literal(text: str) -> str:
    return '"' + "".join(_escape(c, '"\\') for c in text) + '"'


def _class_char(char: str) -> str:
    return _escape(char, "]\\^-[")


def _escape(char: str, special: str) -> str:
    if char in special or not char.isprintable():
        code = ord(char)
        return f"\\x{code:02X}" if code < 0x100 else f"\\u{code:04X}" if code < 0x10000 else f"\\U{code:08X}"
    return char


def _unsupported(what: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"guided_regex uses {what}, which a grammar cannot enforce.", param="guided_regex"
    )
