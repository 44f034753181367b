"""DeepSeek's calls (R1, V3): text, or the calls between `<｜tool▁calls▁begin｜>` and
`<｜tool▁calls▁end｜>`, each `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`, its arguments as a JSON block
(```json … ```), then `<｜tool▁call▁end｜>`.

The grammar holds each call's arguments to its tool's schema; the reader gives each call's name as its
block opens and its arguments as they are written.
"""

from __future__ import annotations

from typing import Any

from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import SectionReader
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

    def reader(self, plan: ToolPlan) -> SectionReader:
        """A reader of one answer in this syntax."""
        return SectionReader((BEGIN, END, f"{CALL}function{SEP}", _OPEN_ARGUMENTS, CALL_END), plan.legacy)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages
