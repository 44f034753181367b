"""Kimi K2's calls (Instruct, Thinking): text, or the calls between `<|tool_calls_section_begin|>` and
`<|tool_calls_section_end|>`, each `<|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>`, its
arguments as JSON, then `<|tool_call_end|>`. The index counts the conversation's calls from 0 (the template
numbers the calls of the history so, and heads each result with the id of the call it answers).

The grammar holds each call's arguments to its tool's schema; the reader gives each call's name as its
arguments begin and its arguments as they are written.
"""

from __future__ import annotations

from typing import Any

from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.sections import SectionCalls

SECTION, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL, ARGUMENTS, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
_PREFIX = "functions."


class Kimi(SectionCalls):
    """Kimi K2's call syntax (the template numbers the calls of the history and heads their results
    itself)."""

    name = "kimi"
    markers = (SECTION, SECTION_END, CALL, ARGUMENTS, CALL_END)

    def named(self, tool: dict[str, Any], grammar: Grammar) -> str:
        # the count of calls so far (a model may not stop)
        index = grammar.shared("index", lambda: grammar.rule("INDEX", "/[0-9]{1,4}/"))
        return f"{grammar.literal(_PREFIX + tool['name'] + ':')} {index} {grammar.literal(ARGUMENTS)}"

    def name_of(self, called: str) -> str:
        """`NAME` of a call's `functions.NAME:INDEX`."""
        name = called.strip().removeprefix(_PREFIX)
        head, colon, index = name.rpartition(":")
        return head if colon and index.isdigit() else name
