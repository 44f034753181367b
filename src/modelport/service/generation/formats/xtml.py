"""Kimi K3's XTML (`kimi_k3`): every section of an answer a tag between markers, `<|open|>NAME
ATTRIBUTES<|sep|>` … `<|close|>NAME<|sep|>`. The thinking is the `think` section, the text the `response`
section (the prompt opens one of the two), the calls one `tools` section after it: each `call tool="NAME"
index="N"` of `argument key="KEY" type="TYPE"` elements, a string as it is and anything else as JSON.

The grammar holds each call's arguments to their order in its schema (the optional ones may be left out),
each value to its type and its `type` to the schema's; the reader is the `<invoke>` syntaxes' over these
tags (the text read without its frame, before it).
"""

from __future__ import annotations

import json
from typing import Any

from modelport.predictors.family_marks import FRAMES, xtml_tag
from modelport.service.generation.formats.call_lists import listed
from modelport.service.generation.formats.invoke_xml import InvokeXml
from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.xml_values import tagged_function
from modelport.service.generation.tools.plan import ToolPlan

OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"
_INDEX, _ENDS = '" index="', f'"{SEP}'  # a call's index attribute after its name; what ends an opening tag
# The `type` its template writes of a value, by its schema's type.
_TYPES = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "object": "object",
    "array": "array",
    "null": "null",
}


class Xtml(InvokeXml):
    """Kimi K3's calls. Its template writes the calls of the history itself."""

    def __init__(self) -> None:
        super().__init__("kimi_k3", xtml_tag("tools"), lines=False)
        self.invoke, self.end_invoke = f'{OPEN}call tool="', xtml_tag("call")[1]
        self.parameter, self.end_parameter = f'{OPEN}argument key="', xtml_tag("argument")[1]

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of an answer that follows `plan`: its text (which may be empty), then the `tools` section
        of its calls (one, or more where calls may go in parallel), which only a required call must have. A
        required call's `response` section is closed at once, empty, as its template writes a turn of calls
        alone: the calls come first, as in every other syntax."""
        assert self.block is not None
        functions = [self._function(tool, i, grammar, compact) for i, tool in enumerate(plan.tools)]
        function = grammar.rule("function", " | ".join(functions))
        invoke = grammar.rule(
            "invoke", f"{grammar.literal(self.invoke)} {function} {grammar.literal(self.end_invoke)}"
        )
        opening, closing = (grammar.literal(tag) for tag in self.block)
        calls = grammar.rule("calls", f"{opening} {listed(plan, invoke)} {closing}")
        if plan.required:
            opened, closed = (grammar.literal(tag) for tag in FRAMES[self.name])
            return grammar.rule("answer", f"({opened})? {closed} {calls}")
        text = grammar.framed("text", FRAMES[self.name], opened=True)
        return grammar.rule("answer", f"{text} {calls}?")

    def _function(self, tool: dict[str, Any], i: int, grammar: Grammar, compact: bool) -> str:
        properties = (tool.get("parameters") or {}).get("properties") or {}

        def opening(key: str) -> str:
            schema = properties.get(key)
            said = _TYPES.get(str(schema.get("type"))) if isinstance(schema, dict) else None
            typed = (
                json.dumps(said) if said else f"({' | '.join(map(json.dumps, sorted(set(_TYPES.values()))))})"
            )
            named = grammar.literal(f'{self.parameter}{key}" type="')
            return f"{named} {typed} {grammar.literal(_ENDS)}"

        index = grammar.shared("index", lambda: grammar.rule("INDEX", "/[1-9][0-9]{0,2}/"))
        head = f"{grammar.literal(tool['name'] + _INDEX)} {index} {grammar.literal(_ENDS)}"
        return tagged_function(tool, i, grammar, compact, head, opening, self.end_parameter, until=CLOSE)


KIMI_K3 = Xtml()
