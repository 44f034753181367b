"""Solar Open's calls (`solar`): every part of its answer a message of its own after the prompt's
`<|begin|>assistant` — its thinking `<|think|>…<|end|>` (then `<|begin|>assistant` again), its text
`<|content|>…`, or its calls `<|tool_calls|>`, each `<|tool_call:begin|>ID<|tool_call:name|>NAME
<|tool_call:args|>`, its arguments as JSON, then `<|tool_call:end|>`, the calls ended by `<|calls|>`. The ID
is ten lowercase letters or digits, as its template tells the model.

The grammar holds each call's arguments to its tool's schema, and the text to its frame; the reader is the
sectioned syntaxes' (the text read without its frame).
"""

from __future__ import annotations

from typing import Any

from modelport.predictors.family_marks import FRAMES, SOLAR_CALLS
from modelport.service.generation.formats.call_lists import calls_or_framed
from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.sections import SectionCalls
from modelport.service.generation.tools.plan import ToolPlan

BEGIN, END, CALL, NAME, ARGUMENTS, CALL_END = SOLAR_CALLS


class Solar(SectionCalls):
    """Solar Open's call syntax (its template writes the calls of the history itself, with their ids)."""

    name = "solar"
    markers = (BEGIN, END, CALL, ARGUMENTS, CALL_END)

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The calls of `plan`, or (unless one is required) its framed text."""
        return calls_or_framed(plan, grammar, self.section(plan, grammar, compact), FRAMES[self.name])

    def named(self, tool: dict[str, Any], grammar: Grammar) -> str:
        call_id = grammar.shared("call_id", lambda: grammar.rule("CALL_ID", "/[a-z0-9]{10}/"))
        return f"{call_id} {grammar.literal(NAME + tool['name'] + ARGUMENTS)}"

    def name_of(self, called: str) -> str:
        """`NAME` of a call's `ID<|tool_call:name|>NAME`."""
        return called.rpartition(NAME)[2].strip()
