"""MiniMax M2's calls: text, or one `<minimax:tool_call>` block holding a call per `<invoke name="NAME">`,
each argument `<parameter name="KEY">VALUE</parameter>` (a string as it is, anything else as JSON), then
`</invoke>`; the block ends with `</minimax:tool_call>`.

The grammar holds each function's arguments to their order in its schema (the optional ones may be left
out) and each value to its type; the reader turns the invocations back into OpenAI's `tool_calls`, each
argument given out as its parameter closes.
"""

from __future__ import annotations

from typing import Any

from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import (
    Delta,
    Stepped,
    arguments_delta,
    call_delta,
    text_until,
    until,
)
from modelport.service.generation.formats.xml_values import argument_piece, tagged_function
from modelport.service.generation.tools.plan import ToolPlan

OPEN, CLOSE = "<minimax:tool_call>", "</minimax:tool_call>"
_INVOKE, _END_INVOKE = '<invoke name="', "</invoke>"
_PARAMETER, _END_PARAMETER = '<parameter name="', "</parameter>"
_NAMED = '">'  # what ends an invocation's or a parameter's name


class MiniMaxXml:
    """MiniMax M2's call syntax (its template writes the calls of the history itself)."""

    name = "minimax_xml"
    arguments = "arguments"

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of an answer that follows `plan`: the block of calls (one, or more where calls may go in
        parallel), or (unless one is required) text that does not begin like it."""
        functions = [self._function(tool, i, grammar, compact) for i, tool in enumerate(plan.tools)]
        function = grammar.rule("function", " | ".join(functions))
        invoke = grammar.rule(
            "invoke", f"{grammar.literal(_INVOKE)} {function} {grammar.literal(_END_INVOKE)}"
        )
        listed = f'{invoke} ("\\n" {invoke})*' if plan.parallel else invoke
        opening, closing = grammar.literal(f"{OPEN}\n"), grammar.literal(f"\n{CLOSE}")
        calls = grammar.rule("calls", f"{opening} {listed} {closing}")
        if plan.required:
            return calls
        text = grammar.text_lexeme("text", not_first="<")
        return grammar.rule("answer", f"{text} | {calls}")

    def _function(self, tool: dict[str, Any], i: int, grammar: Grammar, compact: bool) -> str:
        def opening(key: str) -> str:
            return grammar.literal(f"{_PARAMETER}{key}{_NAMED}")

        head = grammar.literal(f"{tool['name']}{_NAMED}\n")
        return tagged_function(tool, i, grammar, compact, head, opening, f"{_END_PARAMETER}\n")

    def reader(self, plan: ToolPlan) -> InvokeReader:
        """A reader of one answer in this syntax."""
        return InvokeReader({tool["name"]: tool.get("parameters") or {} for tool in plan.tools})

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages


class InvokeReader(Stepped):
    """An answer in MiniMax M2's syntax: text until `<minimax:tool_call>`, then each call's name as its
    invocation opens and each argument as its parameter closes (typed by the tool's schema)."""

    thinking = False

    def __init__(self, parameters: dict[str, dict[str, Any]]) -> None:
        self.parameters = parameters
        self.strayed = False
        self.pending = ""
        self.state = "text"  # text, calls (between invocations), name, parameters, key, value
        self.calls = 0
        self.function = ""
        self.key = ""
        self.written = 0  # arguments written in the open call

    def flush(self, cut: bool) -> list[Delta]:
        text, self.pending = self.pending, ""
        if self.state == "text":
            return [{"content": text}] if text else []
        if self.state in ("parameters", "key", "value") and not cut:
            return [arguments_delta(self.calls - 1, "}" if self.written else "{}")]
        return []

    def _step(self) -> list[Delta]:
        pending = self.pending
        if self.state == "text":
            text, self.pending, opened = text_until(pending, OPEN)
            if opened:
                self.state = "calls"
            return [{"content": text}] if text else []
        stripped = pending.lstrip()
        if self.state == "calls":
            if stripped.startswith(_INVOKE):
                self.pending, self.state = stripped[len(_INVOKE) :], "name"
            elif stripped.startswith(CLOSE):
                self.pending, self.state = stripped[len(CLOSE) :], "text"
            elif stripped and not (_INVOKE.startswith(stripped) or CLOSE.startswith(stripped)):
                self.pending, self.state, self.strayed = stripped, "text", True  # the rest is text
            return []
        if self.state in ("name", "key"):
            end = pending.find(_NAMED)
            if end < 0:
                return []
            name, self.pending = pending[:end], pending[end + len(_NAMED) :]
            if self.state == "key":
                self.key, self.state = name, "value"
                return []
            self.function, self.state, self.written = name, "parameters", 0
            self.calls += 1
            return [call_delta(self.calls - 1, name)]
        if self.state == "parameters":
            if stripped.startswith(_PARAMETER):
                self.pending, self.state = stripped[len(_PARAMETER) :], "key"
            elif stripped.startswith(_END_INVOKE):
                self.pending, self.state = stripped[len(_END_INVOKE) :], "calls"
                return [arguments_delta(self.calls - 1, "}" if self.written else "{}")]
            else:
                self.pending = stripped
            return []
        value, self.pending, closed = until(pending, _END_PARAMETER)  # value
        if not closed:
            self.pending = pending
            return []
        self.state = "parameters"
        parameters = self.parameters.get(self.function) or {}
        piece = argument_piece(parameters, self.key, value.strip("\n"), first=not self.written)
        self.written += 1
        return [arguments_delta(self.calls - 1, piece)]
