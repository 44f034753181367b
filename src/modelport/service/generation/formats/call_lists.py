"""What every call syntax's answer grammar shares: its calls once, or once or more where calls may go in
parallel; and, unless a call is required, text that does not begin like them in their place."""

from __future__ import annotations

from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.tools.plan import ToolPlan


def listed(plan: ToolPlan, call: str, between: str = "") -> str:
    """`call` (a rule) once, or once or more where calls may go in parallel, `between` them (a rule, or
    quoted text; none: they follow each other)."""
    if not plan.parallel:
        return call
    return f"{call} ({between} {call})*" if between else f"{call}+"


def calls_or_text(plan: ToolPlan, grammar: Grammar, calls: str, not_first: str = "<") -> str:
    """The rule of an answer: `calls` (a rule), or (unless a call is required) text that does not begin
    like them (with a character of `not_first`)."""
    if plan.required:
        return calls
    text = grammar.text_lexeme("text", not_first=not_first)
    return grammar.rule("answer", f"{text} | {calls}")


def calls_or_framed(
    plan: ToolPlan, grammar: Grammar, calls: str, frame: tuple[str, str], opened: bool = False
) -> str:
    """The rule of an answer: `calls` (a rule), or (unless a call is required) text between the markers its
    family frames it in (Cohere's, Solar Open's; `opened`: its opening may be written already, as Apriel 1.5's
    thinking ends with it)."""
    if plan.required:
        return calls
    return grammar.rule("answer", f"{grammar.framed('text', frame, opened=opened)} | {calls}")
