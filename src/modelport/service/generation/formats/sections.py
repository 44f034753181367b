"""The call syntaxes whose calls stand in a section of their own (DeepSeek's, Kimi K2's): text, or the
section's opening marker, each call (a head, the function's name up to what opens its arguments, the
arguments as JSON, the rest up to the call's end marker), and the section's closing marker. Each syntax says
its markers and how a function's name and arguments are written; the grammar around them, and the reading
back, are one here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelport.service.generation.formats.call_lists import calls_or_text, listed
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

# A syntax's markers: the section's opening and closing, a call's head, what opens its arguments (after the
# function's name), and a call's end.
Markers = tuple[str, str, str, str, str]


class SectionCalls:
    """A call syntax of calls in a section: `markers`, `between` (the grammar between parallel calls; none:
    they follow each other), and how a function is `named` before its arguments (and what `closes` them,
    where something does), between a call's head and its end."""

    name = ""
    arguments = "arguments"
    markers: Markers = ("", "", "", "", "")
    between = ""
    closes = ""  # what follows a call's arguments before its end, where the syntax writes anything

    def named(self, tool: dict[str, Any], grammar: Grammar) -> str:
        """The grammar of what a call of `tool` writes before its arguments: its name, what opens them."""
        raise NotImplementedError

    def functions(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> list[str]:
        """Each tool's rule: its name as the syntax writes it, then its arguments held to its schema."""
        functions = []
        for i, tool in enumerate(plan.tools):
            arguments = grammar.json(f"arguments{i}", tool.get("parameters") or {"type": "object"}, compact)
            closing = f" {grammar.literal(self.closes)}" if self.closes else ""
            functions.append(
                grammar.rule(f"function{i}", f"{self.named(tool, grammar)} {arguments}{closing}")
            )
        return functions

    def name_of(self, called: str) -> str:
        """A function's name, of what a call writes before its arguments."""
        return called.strip()

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The calls of `plan`, or (unless one is required) text that does not begin like them."""
        return calls_or_text(plan, grammar, self.section(plan, grammar, compact))

    def section(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of the section of calls (one at least; more where calls may go in parallel)."""
        begin, end, head, _, call_end = self.markers
        functions = self.functions(plan, grammar, compact)
        call = grammar.rule(
            "call", f"{grammar.literal(head)} ({' | '.join(functions)}) {grammar.literal(call_end)}"
        )
        calls = f"{grammar.literal(begin)} {listed(plan, call, self.between)} {grammar.literal(end)}"
        return grammar.rule("calls", calls)

    def reader(self, plan: ToolPlan) -> SectionReader:
        """A reader of one answer in this syntax."""
        return SectionReader(self.markers, plan.legacy, self.name_of)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages  # their templates write the calls and results of the history themselves


class SectionReader(Stepped):
    """An answer of text, then its calls between `begin` and `end`: each `head`, the name (as `name_of`
    reads it) up to `arguments`, the arguments as JSON, and whatever is left up to `call_end` (DeepSeek's
    and Kimi K2's syntaxes). Each call's name is given as its arguments begin, and its arguments as they are
    written."""

    thinking = False

    def __init__(
        self,
        markers: Markers,
        legacy: bool = False,
        name_of: Callable[[str], str] = str.strip,
    ) -> None:
        self.begin, self.end, self.head, self.opening, self.call_end = markers
        self.legacy = legacy
        self.name_of = name_of
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
            text, self.pending, begun = until(pending, self.begin)
            if begun:
                self.state = "calls"
            return [{"content": text}] if text else []
        if self.state == "calls":
            stripped = pending.lstrip()
            if stripped.startswith(self.head):
                self.pending, self.state = stripped[len(self.head) :], "name"
            elif stripped.startswith(self.end):
                self.pending, self.state = stripped[len(self.end) :], "text"
            elif stripped and not (self.head.startswith(stripped) or self.end.startswith(stripped)):
                self.pending, self.state, self.strayed = stripped, "text", True
            return []
        if self.state == "name":
            at = pending.find(self.opening)
            if at < 0:
                return []
            self.calls += 1
            self.pending, self.state = pending[at + len(self.opening) :], "arguments"
            self.arguments = JsonArguments()
            return [call_delta(self.calls - 1, self.name_of(pending[:at]), self.legacy)]
        if self.state == "arguments":
            assert self.arguments is not None
            piece, self.pending = self.arguments.feed(pending)
            if self.arguments.done:
                self.state = "closing"
            return [arguments_delta(self.calls - 1, piece, self.legacy)] if piece else []
        at = pending.find(self.call_end)  # closing: the rest of the call, up to its end
        if at >= 0:
            self.pending, self.state = pending[at + len(self.call_end) :], "calls"
        return []
