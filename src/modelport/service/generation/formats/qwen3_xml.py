"""Qwen3-Coder's XML calls: text, or one block per call (`<tool_call>`, `<function=NAME>`, then for each
argument `<parameter=KEY>`, its value on lines of its own and `</parameter>`; then `</function>` and
`</tool_call>`), each value written as text (a string as it is, a number or a boolean as JSON writes it, an
object or a list as JSON).

The grammar holds each function's parameters to their order in its schema (the optional ones may be left
out) and each value to its type; the reader turns the blocks back into OpenAI's `tool_calls`, each argument
given out as its parameter closes.
"""

from __future__ import annotations

from typing import Any

from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import (
    ArgumentsReader,
    Delta,
    call_delta,
    until,
)
from modelport.service.generation.formats.xml_values import (
    ArgumentText,
    parameter_schema,
    tagged_calls,
    tagged_function,
)
from modelport.service.generation.tools.plan import ToolPlan

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_FUNCTION, _END_FUNCTION = "<function=", "</function>"
_PARAMETER, _END_PARAMETER = "<parameter=", "</parameter>"


class Qwen3Xml:
    """Qwen3-Coder's call syntax; with `seed`, Seed-OSS's: its blocks in `<seed:tool_call>`, each value
    between its tags with no line breaks around it."""

    arguments = "arguments"

    def __init__(self, seed: bool = False) -> None:
        self.name = "seed_xml" if seed else "qwen3_xml"
        self.opener, self.closer = ("<seed:tool_call>", "</seed:tool_call>") if seed else (_OPEN, _CLOSE)
        self.value_break = "" if seed else "\n"

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of an answer that follows `plan`: the calls, or (unless one is required) text that
        does not begin like one."""
        functions = [self._function(tool, i, grammar, compact) for i, tool in enumerate(plan.tools)]
        tags = (f"{self.opener}\n{_FUNCTION}", f"{_END_FUNCTION}\n{self.closer}")
        return tagged_calls(plan, grammar, functions, tags, '"\\n"')

    def _function(self, tool: dict[str, Any], i: int, grammar: Grammar, compact: bool) -> str:
        def opening(key: str) -> str:
            return grammar.literal(f"{_PARAMETER}{key}>{self.value_break}")

        head = grammar.literal(f"{tool['name']}>\n")
        ending = f"{self.value_break}{_END_PARAMETER}\n"
        return tagged_function(tool, i, grammar, compact, head, opening, ending)

    def reader(self, plan: ToolPlan) -> XmlReader:
        """A reader of one answer in this syntax."""
        parameters = {tool["name"]: tool.get("parameters") or {} for tool in plan.tools}
        return XmlReader(parameters, self.opener, self.closer)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages


class XmlReader(ArgumentsReader):
    """An answer in Qwen3-Coder's syntax: text until `<tool_call>`, then each call's name as its function
    opens and each argument as its parameter closes (typed by the tool's schema). Its states: text, call
    (before `<function=`), function (its name), parameters, value."""

    inside = ("parameters", "value")

    def __init__(
        self, parameters: dict[str, dict[str, Any]], opener: str = _OPEN, closer: str = _CLOSE
    ) -> None:
        super().__init__(parameters)
        self.opener, self.closer = opener, closer

    def _step(self) -> list[Delta]:
        pending = self.pending
        if self.state == "text":
            text, self.pending, opened = until(pending, self.opener)
            if opened:  # the whitespace before a call is the template's, not the model's answer
                self.state = "call"
                return [{"content": text}] if text.strip() else []
            return [{"content": text}] if text else []
        if self.state == "call":
            stripped = pending.lstrip()
            if stripped.startswith(_FUNCTION):
                self.pending, self.state = stripped[len(_FUNCTION) :], "function"
            elif stripped.startswith(self.opener):  # another call after this one
                self.pending = stripped[len(self.opener) :]
            elif stripped and not (_FUNCTION.startswith(stripped) or self.opener.startswith(stripped)):
                self.pending, self.state, self.strayed = stripped, "text", True  # the rest is text
            return []
        if self.state == "function":
            end = pending.find(">")
            if end < 0:
                return []
            self.function, self.pending = pending[:end].strip(), pending[end + 1 :]
            self.calls += 1
            self.state, self.written = "parameters", 0
            return [call_delta(self.calls - 1, self.function)]
        if self.state == "parameters":
            stripped = pending.lstrip()
            if stripped.startswith(_PARAMETER):
                end = stripped.find(">")
                if end < 0:
                    return []
                self.key, self.pending, self.state = (
                    stripped[len(_PARAMETER) : end],
                    stripped[end + 1 :],
                    "value",
                )
                schema = parameter_schema(self.parameters.get(self.function), self.key)
                self.argument = ArgumentText(_END_PARAMETER, schema, trims=1)  # a line break on each side
                return []
            if stripped.startswith(_END_FUNCTION):
                self.pending, self.state = stripped[len(_END_FUNCTION) :].lstrip(), "closing"
                return [self.closed()]
            self.pending = stripped
            return []
        if self.state == "value":
            return self._read_argument(pending, "parameters")
        # closing: past </function>, before </tool_call>
        stripped = pending.lstrip()
        if stripped.startswith(self.closer):
            self.pending, self.state = stripped[len(self.closer) :], "text_after"
        elif stripped and not self.closer.startswith(stripped):
            self.pending, self.state = stripped, "text_after"
        if self.state == "text_after":
            rest = self.pending.lstrip()
            if rest.startswith(self.opener):
                self.pending, self.state = rest[len(self.opener) :], "call"
            elif rest and not self.opener.startswith(rest):
                self.pending, self.state = rest, "text"
            else:
                self.pending = rest
        return []
