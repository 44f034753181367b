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
from modelport.service.generation.formats.readers import SectionReader
from modelport.service.generation.tools.plan import ToolPlan

SECTION, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL, ARGUMENTS, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
MARKERS = (SECTION, CALL, ARGUMENTS, CALL_END, SECTION_END)
_PREFIX = "functions."


class Kimi:
    """Kimi K2's call syntax."""

    name = "kimi"
    arguments = "arguments"

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The calls of `plan` (one at least; more where calls may go in parallel), or (unless one is
        required) text that does not begin like them."""
        index = grammar.rule("INDEX", "/[0-9]{1,4}/")  # the count of calls so far (a model may not stop)
        functions = []
        for i, tool in enumerate(plan.tools):
            arguments = grammar.json(f"arguments{i}", tool.get("parameters") or {"type": "object"}, compact)
            named = f"{grammar.literal(_PREFIX + tool['name'] + ':')} {index} {grammar.literal(ARGUMENTS)}"
            functions.append(grammar.rule(f"function{i}", f"{named} {arguments}"))
        call = grammar.rule(
            "call", f"{grammar.literal(CALL)} ({' | '.join(functions)}) {grammar.literal(CALL_END)}"
        )
        listed = f"{call}+" if plan.parallel else call
        calls = grammar.rule("calls", f"{grammar.literal(SECTION)} {listed} {grammar.literal(SECTION_END)}")
        if plan.required:
            return calls
        text = grammar.text_lexeme("text", not_first="<")
        return grammar.rule("answer", f"{text} | {calls}")

    def reader(self, plan: ToolPlan) -> SectionReader:
        """A reader of one answer in this syntax."""
        return SectionReader((SECTION, SECTION_END, CALL, ARGUMENTS, CALL_END), plan.legacy, function_name)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages  # the template numbers the calls and heads their results itself


def function_name(called: str) -> str:
    """`NAME` of a call's `functions.NAME:INDEX`."""
    name = called.strip().removeprefix(_PREFIX)
    head, colon, index = name.rpartition(":")
    return head if colon and index.isdigit() else name
