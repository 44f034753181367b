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
from modelport.service.generation.formats.readers import (
    Delta,
    JsonArguments,
    Stepped,
    arguments_delta,
    call_delta,
    until,
)
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

    def reader(self, plan: ToolPlan) -> KimiReader:
        """A reader of one answer in this syntax."""
        return KimiReader(plan.legacy)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages  # the template numbers the calls and heads their results itself


class KimiReader(Stepped):
    """An answer in Kimi K2's syntax: text until its calls begin, then each call."""

    thinking = False

    def __init__(self, legacy: bool = False) -> None:
        self.legacy = legacy
        self.pending = ""
        self.state = "text"  # text, calls (between calls), name, arguments, closing (after the arguments)
        self.calls = 0
        self.arguments: JsonArguments | None = None
        self.strayed = False

    def flush(self, cut: bool) -> list[Delta]:
        text, self.pending = self.pending, ""
        return [{"content": text}] if self.state == "text" and text else []

    def _step(self) -> list[Delta]:
        pending = self.pending
        if self.state == "text":
            text, self.pending, begun = until(pending, SECTION)
            if begun:
                self.state = "calls"
            return [{"content": text}] if text else []
        if self.state == "calls":
            stripped = pending.lstrip()
            if stripped.startswith(CALL):
                self.pending, self.state = stripped[len(CALL) :], "name"
            elif stripped.startswith(SECTION_END):
                self.pending, self.state = stripped[len(SECTION_END) :], "text"
            elif stripped and not (CALL.startswith(stripped) or SECTION_END.startswith(stripped)):
                self.pending, self.state, self.strayed = stripped, "text", True
            return []
        if self.state == "name":
            at = pending.find(ARGUMENTS)
            if at < 0:
                return []
            self.calls += 1
            self.pending, self.state = pending[at + len(ARGUMENTS) :], "arguments"
            self.arguments = JsonArguments()
            return [call_delta(self.calls - 1, function_name(pending[:at]), self.legacy)]
        if self.state == "arguments":
            assert self.arguments is not None
            piece, self.pending = self.arguments.feed(pending)
            if self.arguments.done:
                self.state = "closing"
            return [arguments_delta(self.calls - 1, piece, self.legacy)] if piece else []
        at = pending.find(CALL_END)  # closing: the rest of the call, up to its end
        if at >= 0:
            self.pending, self.state = pending[at + len(CALL_END) :], "calls"
        return []


def function_name(called: str) -> str:
    """`NAME` of a call's `functions.NAME:INDEX`."""
    name = called.strip().removeprefix(_PREFIX)
    head, colon, index = name.rpartition(":")
    return head if colon and index.isdigit() else name
