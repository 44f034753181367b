"""GLM's tagged calls (GLM 4.5 to 4.7, and the families that took them up: Ling 3.0, Laguna, Spark): text, or
one block per call, `<tool_call>NAME`, then for each argument `<arg_key>KEY</arg_key>` and
`<arg_value>VALUE</arg_value>`, then `</tool_call>`; a line break after each part in GLM 4.5 and 4.6's
templates, none in 4.7's (the grammar takes either). A value is text: a string as it is, anything else as
JSON.

The grammar holds each function's arguments to their order in its schema (the optional ones may be left
out) and each value to its type; the reader turns the blocks back into OpenAI's `tool_calls`, each argument
given out as its value closes.
"""

from __future__ import annotations

from typing import Any

from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import (
    ArgumentsReader,
    Delta,
    arguments_delta,
    call_delta,
    until,
)
from modelport.service.generation.formats.xml_values import argument_piece, tagged_calls, tagged_function
from modelport.service.generation.tools.plan import ToolPlan

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_KEY, _END_KEY = "<arg_key>", "</arg_key>"
_VALUE, _END_VALUE = "<arg_value>", "</arg_value>"
_BREAK = '"\\n"?'  # the line break GLM 4.5 and 4.6 write between the parts, and 4.7 does not


class GlmXml:
    """GLM's call syntax."""

    name = "glm_xml"
    arguments = "arguments"
    opener = _OPEN

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of an answer that follows `plan`: the calls, or (unless one is required) text that
        does not begin like one."""
        functions = [self._function(tool, i, grammar, compact) for i, tool in enumerate(plan.tools)]
        return tagged_calls(plan, grammar, functions, (_OPEN, _CLOSE), _BREAK)

    def _function(self, tool: dict[str, Any], i: int, grammar: Grammar, compact: bool) -> str:
        def opening(key: str) -> str:
            return f"{grammar.literal(f'{_KEY}{key}{_END_KEY}')} {_BREAK} {grammar.literal(_VALUE)}"

        head = f"{grammar.literal(tool['name'])} {_BREAK}"
        return tagged_function(tool, i, grammar, compact, head, opening, _END_VALUE, _BREAK)

    def reader(self, plan: ToolPlan) -> GlmReader:
        """A reader of one answer in this syntax."""
        return GlmReader({tool["name"]: tool.get("parameters") or {} for tool in plan.tools})

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages


class GlmReader(ArgumentsReader):
    """An answer in GLM's syntax: text until `<tool_call>`, then each call's name as its first part ends
    and each argument as its value closes (typed by the tool's schema). Its states: text, name, arguments,
    value, between (after `</tool_call>`)."""

    def flush(self, cut: bool) -> list[Delta]:
        text, self.pending = self.pending, ""
        if self.state == "text":
            return [{"content": text}] if text else []
        if self.state == "name" and text.strip() and not cut:  # a call of no arguments, unclosed
            return [*self._named(text.strip()), arguments_delta(self.calls - 1, "{}")]
        if self.state in ("arguments", "value") and not cut:
            return [arguments_delta(self.calls - 1, "}" if self.written else "{}")]
        return []

    def _named(self, name: str) -> list[Delta]:
        self.function, self.state, self.written = name, "arguments", 0
        self.calls += 1
        return [call_delta(self.calls - 1, name)]

    def _step(self) -> list[Delta]:
        pending = self.pending
        if self.state in ("text", "between"):
            if self.state == "between":  # the line break between two calls is the format's
                stripped = pending.lstrip()
                if not stripped or _OPEN.startswith(stripped):
                    return []
                if not stripped.startswith(_OPEN):
                    self.state = "text"
                pending = self.pending = stripped
            text, self.pending, opened = until(pending, _OPEN)
            if opened:  # the whitespace before a call is the template's, not the model's answer
                self.state = "name"
                return [{"content": text}] if text.strip() else []
            return [{"content": text}] if text else []
        if self.state == "name":  # the name ends at the line break or the first tag after it
            ends = [at for at in (pending.find("\n"), pending.find("<")) if at >= 0]
            if not ends:
                return []
            end = min(ends)
            name, self.pending = pending[:end].strip(), pending[end:].lstrip("\n")
            if not name:
                self.pending, self.state, self.strayed = pending, "text", True  # no call after all
                return []
            return self._named(name)
        if self.state == "arguments":
            stripped = pending.lstrip()
            if stripped.startswith(_KEY):
                end = stripped.find(_END_KEY)
                if end < 0:
                    return []
                after = stripped[end + len(_END_KEY) :].lstrip()
                if len(after) < len(_VALUE) and _VALUE.startswith(after):
                    return []
                if not after.startswith(_VALUE):
                    self.pending, self.state, self.strayed = after, "text", True
                    return [arguments_delta(self.calls - 1, "}" if self.written else "{}")]
                self.key, self.pending, self.state = stripped[len(_KEY) : end], after[len(_VALUE) :], "value"
                return []
            if stripped.startswith(_CLOSE):
                self.pending, self.state = stripped[len(_CLOSE) :], "between"
                return [arguments_delta(self.calls - 1, "}" if self.written else "{}")]
            if stripped and not (_KEY.startswith(stripped) or _CLOSE.startswith(stripped)):
                self.pending, self.state, self.strayed = stripped, "text", True
                return [arguments_delta(self.calls - 1, "}" if self.written else "{}")]
            self.pending = stripped
            return []
        # value: up to </arg_value>
        end = pending.find(_END_VALUE)
        if end < 0:
            return []
        value, self.pending, self.state = pending[:end], pending[end + len(_END_VALUE) :], "arguments"
        parameters = self.parameters.get(self.function) or {}
        piece = argument_piece(parameters, self.key, value, first=not self.written)
        self.written += 1
        return [arguments_delta(self.calls - 1, piece)]
