"""DeepSeek's calls (R1, V3): text, or the calls between `<｜tool▁calls▁begin｜>` and
`<｜tool▁calls▁end｜>`, each `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`, its arguments as a JSON block
(```json … ```), then `<｜tool▁call▁end｜>`.

The grammar holds each call's arguments to its tool's schema; the reader gives each call's name as its
block opens and its arguments as they are written.
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

BEGIN, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL, SEP, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"
_OPEN_ARGUMENTS, _CLOSE_ARGUMENTS = "\n```json\n", "\n```"


class DeepSeek:
    """DeepSeek's call syntax."""

    name = "deepseek"
    arguments = "arguments"

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The calls of `plan` (one at least; more where calls may go in parallel), or (unless one is
        required) text that does not begin like them."""
        functions = []
        for i, tool in enumerate(plan.tools):
            arguments = grammar.json(f"arguments{i}", tool.get("parameters") or {"type": "object"}, compact)
            opening = grammar.literal(f"{tool['name']}{_OPEN_ARGUMENTS}")
            functions.append(
                grammar.rule(f"function{i}", f"{opening} {arguments} {grammar.literal(_CLOSE_ARGUMENTS)}")
            )
        opening, closing = grammar.literal(f"{CALL}function{SEP}"), grammar.literal(CALL_END)
        call = grammar.rule("call", f"{opening} ({' | '.join(functions)}) {closing}")
        listed = f'{call} ("\\n" {call})*' if plan.parallel else call
        calls = grammar.rule("calls", f"{grammar.literal(BEGIN)} {listed} {grammar.literal(END)}")
        if plan.required:
            return calls
        text = grammar.text_lexeme("text", not_first="<")
        return grammar.rule("answer", f"{text} | {calls}")

    def reader(self, plan: ToolPlan) -> DeepSeekReader:
        """A reader of one answer in this syntax."""
        return DeepSeekReader(plan.legacy)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages


class DeepSeekReader(Stepped):
    """An answer in DeepSeek's syntax: text until its calls begin, then each call."""

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
            text, self.pending, begun = until(pending, BEGIN)
            if begun:
                self.state = "calls"
            return [{"content": text}] if text else []
        if self.state == "calls":
            stripped = pending.lstrip()
            head = f"{CALL}function{SEP}"
            if stripped.startswith(head):
                self.pending, self.state = stripped[len(head) :], "name"
            elif stripped.startswith(END):
                self.pending, self.state = stripped[len(END) :], "text"
            elif stripped and not (head.startswith(stripped) or END.startswith(stripped)):
                self.pending, self.state, self.strayed = stripped, "text", True
            return []
        if self.state == "name":
            at = pending.find(_OPEN_ARGUMENTS)
            if at < 0:
                return []
            self.calls += 1
            self.pending, self.state = pending[at + len(_OPEN_ARGUMENTS) :], "arguments"
            self.arguments = JsonArguments()
            return [call_delta(self.calls - 1, pending[:at].strip(), self.legacy)]
        if self.state == "arguments":
            assert self.arguments is not None
            piece, self.pending = self.arguments.feed(pending)
            if self.arguments.done:
                self.state = "closing"
            return [arguments_delta(self.calls - 1, piece, self.legacy)] if piece else []
        at = pending.find(CALL_END)  # closing: the rest of the block, up to its end
        if at >= 0:
            self.pending, self.state = pending[at + len(CALL_END) :], "calls"
        return []
