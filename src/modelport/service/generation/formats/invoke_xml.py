"""The calls written as XML elements of a name and named parameters: `<invoke>` elements in a block of their
own, MiniMax M2's (`minimax_xml`: a `<minimax:tool_call>` block) and DeepSeek V3.2's and V4's
(`deepseek_v32`, `deepseek_v4`: every tag after `｜DSML｜`, the block `function_calls` in V3.2 and
`tool_calls` in V4, and each parameter saying whether its value is a string); and MiniCPM5's `<function>`
elements, in no block (`minicpm5`).
Each call is `<invoke name="NAME">`, each argument `<parameter name="KEY">VALUE</parameter>` (a string as it
is, anything else as JSON), then `</invoke>`, each on a line of its own; MiniCPM5's `<function name="NAME">`,
`<param name="KEY">VALUE</param>` and `</function>` follow each other, a string with `<`, `&` or a line break
in it wrapped in `<![CDATA[…]]>`.

The grammar holds each function's arguments to their order in its schema (the optional ones may be left
out) and each value to its type; the reader turns the invocations back into OpenAI's `tool_calls`, each
argument given out as its parameter closes.
"""

from __future__ import annotations

from typing import Any

from modelport.service.generation.formats.call_lists import calls_or_text, listed
from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import (
    ArgumentsReader,
    Delta,
    call_delta,
    text_until,
)
from modelport.service.generation.formats.xml_values import (
    ArgumentText,
    free_text,
    parameter_schema,
    tagged_function,
)
from modelport.service.generation.tools.plan import ToolPlan

DSML = "｜DSML｜"


class InvokeXml:
    """One family's syntax of named elements: its block's tags (None: the calls stand alone), the prefix of
    every other tag, the names of a call's and a parameter's elements, whether each element is on a line of
    its own, and whether a parameter says if its value is a string (`string="true"`). The family's template
    writes the calls of the history itself."""

    arguments = "arguments"

    def __init__(
        self,
        name: str,
        block: tuple[str, str] | None,
        prefix: str = "",
        typed: bool = False,
        elements: tuple[str, str] = ("invoke", "parameter"),
        lines: bool = True,
    ) -> None:
        self.name = name
        self.block = block
        call, parameter = elements
        self.invoke, self.end_invoke = f'<{prefix}{call} name="', f"</{prefix}{call}>"
        self.parameter, self.end_parameter = f'<{prefix}{parameter} name="', f"</{prefix}{parameter}>"
        self.typed = typed
        self.line = "\n" if lines else ""

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of an answer that follows `plan`: the calls (one, or more where calls may go in parallel)
        in their block, or (unless one is required) text that does not begin like them."""
        functions = [self._function(tool, i, grammar, compact) for i, tool in enumerate(plan.tools)]
        function = grammar.rule("function", " | ".join(functions))
        invoked = f"{grammar.literal(self.invoke)} {function} {grammar.literal(self.end_invoke)}"
        invoke = grammar.rule("invoke", invoked)
        invokes = listed(plan, invoke, grammar.literal(self.line) if self.line else "")
        if self.block is not None:
            opening, closing = grammar.literal(f"{self.block[0]}\n"), grammar.literal(f"\n{self.block[1]}")
            invokes = f"{opening} {invokes} {closing}"
        return calls_or_text(plan, grammar, grammar.rule("calls", invokes))

    def _function(self, tool: dict[str, Any], i: int, grammar: Grammar, compact: bool) -> str:
        properties = (tool.get("parameters") or {}).get("properties") or {}

        def opening(key: str) -> str:
            schema = properties.get(key)
            string = isinstance(schema, dict) and (free_text(schema) or schema.get("type") == "string")
            said = f' string="{"true" if string else "false"}"' if self.typed else ""
            return grammar.literal(f'{self.parameter}{key}"{said}>')

        head = grammar.literal(f'{tool["name"]}">{self.line}')
        return tagged_function(tool, i, grammar, compact, head, opening, f"{self.end_parameter}{self.line}")

    def reader(self, plan: ToolPlan) -> InvokeReader:
        """A reader of one answer in this syntax."""
        return InvokeReader(self, {tool["name"]: tool.get("parameters") or {} for tool in plan.tools})

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages


MINIMAX = InvokeXml("minimax_xml", ("<minimax:tool_call>", "</minimax:tool_call>"))
DEEPSEEK_V4 = InvokeXml("deepseek_v4", (f"<{DSML}tool_calls>", f"</{DSML}tool_calls>"), DSML, typed=True)
DEEPSEEK_V32 = InvokeXml(
    "deepseek_v32", (f"<{DSML}function_calls>", f"</{DSML}function_calls>"), DSML, typed=True
)
MINICPM5 = InvokeXml("minicpm5", None, elements=("function", "param"), lines=False)


class InvokeReader(ArgumentsReader):
    """An answer in an `<invoke>` syntax: text until its block opens, then each call's name as its
    invocation opens and each argument as its parameter closes (typed by the tool's schema). Its states:
    text, calls (between invocations), name, parameters, key, value."""

    inside = ("parameters", "key", "value")

    def __init__(self, syntax: InvokeXml, parameters: dict[str, dict[str, Any]]) -> None:
        super().__init__(parameters)
        self.syntax = syntax

    def _step(self) -> list[Delta]:
        pending, syntax = self.pending, self.syntax
        if self.state == "text":
            block = syntax.block
            text, self.pending, opened = text_until(pending, block[0] if block else syntax.invoke)
            if opened:
                self.state = "calls" if block else "name"
            return [{"content": text}] if text else []
        stripped = pending.lstrip()
        if self.state == "calls":
            close = syntax.block[1] if syntax.block else None
            if stripped.startswith(syntax.invoke):
                self.pending, self.state = stripped[len(syntax.invoke) :], "name"
            elif close is not None and stripped.startswith(close):
                self.pending, self.state = stripped[len(close) :], "text"
            elif stripped and not (syntax.invoke.startswith(stripped) or (close or "").startswith(stripped)):
                self.pending, self.state, self.strayed = stripped, "text", True  # the rest is text
            return []
        if self.state in ("name", "key"):
            quote, end = pending.find('"'), pending.find(">")
            if quote < 0 or end < 0:
                return []
            name, self.pending = pending[:quote], pending[end + 1 :]  # what is between: `string="…"`
            if self.state == "key":
                self.key, self.state = name, "value"
                schema = parameter_schema(self.parameters.get(self.function), name)
                self.argument = ArgumentText(syntax.end_parameter, schema, trims=None, cdata=True)
                return []
            self.function, self.state, self.written = name, "parameters", 0
            self.calls += 1
            return [call_delta(self.calls - 1, name)]
        if self.state == "parameters":
            if stripped.startswith(syntax.parameter):
                self.pending, self.state = stripped[len(syntax.parameter) :], "key"
            elif stripped.startswith(syntax.end_invoke):
                self.pending, self.state = stripped[len(syntax.end_invoke) :], "calls"
                return [self.closed()]
            else:
                self.pending = stripped
            return []
        return self._read_argument(pending, "parameters")  # value
