"""MiniMax M3's calls (`minimax_m3`): one block, `NS<tool_call>`, of invocations `NS<invoke name="NAME">`,
each argument an element named by its key (`NS<KEY>VALUE NS</KEY>`), then `NS</invoke>`; every tag after the
namespace token NS (`]<]minimax[>[`). A value is a string as it is, a number or a boolean as JSON writes it,
an object of known properties the elements of its properties and a list the `NS<item>` elements of its items
(as the template's `to_xml` writes them), anything else JSON (as llama.cpp's reading of M3 takes it).

The grammar holds each function's arguments to their order in its schema (the optional ones may be left out)
and each value to its type; the reader gives each argument out as its element closes, made the JSON value
its schema says it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

from modelport.protocol.validation import json_value
from modelport.service.generation.formats.call_lists import calls_or_text, listed
from modelport.service.generation.formats.invoke_xml import InvokeReader, InvokeXml
from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import Delta, arguments_delta
from modelport.service.generation.formats.xml_values import (
    INTEGER,
    NUMBER,
    ArgumentText,
    argument_piece,
    bounded,
    free_text,
    in_order,
    parameter_schema,
    rule_name,
)
from modelport.service.generation.tools.plan import ToolPlan

NS = "]<]minimax[>["
BLOCK, END_BLOCK = f"{NS}<tool_call>", f"{NS}</tool_call>"
_LINE = "\n"  # after the block's opening and each invocation
_TAG = re.compile(re.escape(NS) + r"<(/?)([^<>]*)>")  # an element's opening or closing tag


class MiniMaxM3(InvokeXml):
    """MiniMax M3's syntax: the `<invoke>` syntaxes' block and invocations, each argument an element of its
    own. Its template writes the calls of the history itself."""

    def __init__(self) -> None:
        super().__init__("minimax_m3", (BLOCK, END_BLOCK))
        self.invoke, self.end_invoke = f'{NS}<invoke name="', f"{NS}</invoke>"

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of an answer that follows `plan`: the block of invocations (one, or more where calls may
        go in parallel), or (unless a call is required) text that does not begin like it."""
        functions = [self._function(tool, i, grammar, compact) for i, tool in enumerate(plan.tools)]
        function = grammar.rule("function", " | ".join(functions))
        opening, closing = grammar.literal(self.invoke), grammar.literal(self.end_invoke + _LINE)
        invoke = grammar.rule("invoke", f"{opening} {function} {closing}")
        block = f"{grammar.literal(BLOCK + _LINE)} {listed(plan, invoke)} {grammar.literal(END_BLOCK)}"
        return calls_or_text(plan, grammar, grammar.rule("calls", block), not_first=NS[0])

    def _function(self, tool: dict[str, Any], i: int, grammar: Grammar, compact: bool) -> str:
        head = grammar.literal(f'{tool["name"]}">')
        members = _members(tool.get("parameters") or {}, f"t{i}", grammar, compact)
        return grammar.rule(f"f{i}", f"{head} {members}".rstrip())

    def reader(self, plan: ToolPlan) -> MiniMaxM3Reader:
        """A reader of one answer in this syntax."""
        return MiniMaxM3Reader(self, {tool["name"]: tool.get("parameters") or {} for tool in plan.tools})


def _members(schema: dict[str, Any], name: str, grammar: Grammar, compact: bool) -> str:
    """The elements of an object's properties, in their order (the optional ones free to be left out)."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    elements = []
    for key, property_schema in properties.items():
        rule = f"{name}_{rule_name(key)}"
        typed = property_schema if isinstance(property_schema, dict) else {}
        value = _value(typed, rule, f"{NS}</{key}>", grammar, compact)
        elements.append(
            (grammar.rule(f"p_{rule}", f"{grammar.literal(f'{NS}<{key}>')} {value}"), key in required)
        )
    return in_order(elements, '""')


def _value(schema: dict[str, Any], name: str, closing: str, grammar: Grammar, compact: bool) -> str:
    """The rule of a value of `schema` and the tag that closes its element."""
    closed = grammar.literal(closing)
    kind, enum = schema.get("type"), schema.get("enum")
    if kind == "string" and enum and all(isinstance(v, str) for v in enum):
        return "(" + " | ".join(grammar.literal(v) for v in enum) + f") {closed}"
    if kind == "string":  # as it is, up to the namespace token that begins the closing tag
        return f"{grammar.shared('string', lambda: grammar.text_lexeme('STRING', NS))} {closed}"
    if kind == "integer" and not bounded(schema):
        return f"{grammar.shared('integer', lambda: grammar.rule('INTEGER', INTEGER))} {closed}"
    if kind == "number" and not bounded(schema):
        return f"{grammar.shared('number', lambda: grammar.rule('NUMBER', NUMBER))} {closed}"
    if kind == "boolean":
        return f'("true" | "false") {closed}'
    if kind == "object" and schema.get("properties"):
        return f"{_members(schema, name, grammar, compact)} {closed}"
    items = schema.get("items")
    if kind == "array" and isinstance(items, dict):
        inner = _value(items, f"{name}_item", f"{NS}</item>", grammar, compact)
        item = grammar.rule(f"i_{name}", f"{grammar.literal(f'{NS}<item>')} {inner}")
        return f"{item}* {closed}"
    return f"{grammar.json(f'v_{name}', schema, compact)} {closed}"


def as_json(value: str, schema: dict[str, Any]) -> str:
    """An argument's text (its element's content) as the JSON value its schema says it is."""
    return json.dumps(_read(value, schema), ensure_ascii=False, separators=(", ", ": "))


def _read(value: str, schema: dict[str, Any]) -> Any:
    """An element's content as the value its schema says it is."""
    kind = schema.get("type")
    if kind == "string":
        return value
    children = _children(value)
    if children is not None:  # elements: an object's properties, or a list's items
        if kind == "array" or (kind is None and children and all(tag == "item" for tag, _ in children)):
            items = schema.get("items")
            return [_read(inner, items if isinstance(items, dict) else {}) for _, inner in children]
        properties = schema.get("properties") or {}
        return {tag: _read(inner, properties.get(tag) or {}) for tag, inner in children}
    try:
        return json_value(value)
    except ValueError:
        return value


def _children(value: str) -> list[tuple[str, str]] | None:
    """The elements `value` is made of (each tag and its content), or None where it is text."""
    if not value.strip().startswith(NS):
        return None
    children: list[tuple[str, str]] = []
    depth, tag, began = 0, "", 0
    for found in _TAG.finditer(value):
        closing, name = found.group(1) == "/", found.group(2)
        if not closing:
            if depth == 0:
                tag, began = name, found.end()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                children.append((tag, value[began : found.start()]))
    return children


class MiniMaxM3Reader(InvokeReader):
    """An answer in MiniMax M3's syntax: the `<invoke>` syntaxes' reading of the block and the invocations,
    and each argument as its element closes (the elements inside it counted)."""

    def __init__(self, syntax: MiniMaxM3, parameters: dict[str, dict[str, Any]]) -> None:
        super().__init__(syntax, parameters)
        self.seen = 0  # how far the open argument's value has been read for tags
        self.depth = 0  # the elements open inside it there

    def _step(self) -> list[Delta]:
        if self.state == "value":  # a free-text string streamed as it comes; any other value whole
            return self._read_argument(self.pending, "parameters") if self.argument else self._value()
        stripped = self.pending.lstrip()
        if self.state != "parameters" or stripped.startswith(self.syntax.end_invoke):
            return super()._step()
        tag = _TAG.match(stripped)
        if tag is not None and not tag.group(1):
            self.key, self.pending, self.state = tag.group(2), stripped[tag.end() :], "value"
            self.seen = self.depth = 0
            schema = parameter_schema(self.parameters.get(self.function), self.key)
            if free_text(schema):  # its text holds no tag: it ends at its own
                self.argument = ArgumentText(f"{NS}</{self.key}>", schema, as_json=as_json, quoted=False)
        elif tag is not None or (stripped and not (NS.startswith(stripped) or stripped.startswith(NS))):
            self.pending, self.state, self.strayed = stripped, "text", True  # the rest is text
        return []

    def _value(self) -> list[Delta]:
        """An argument's element, given out once it closes (the elements inside it counted)."""
        for found in _TAG.finditer(self.pending, self.seen):
            self.seen = found.end()
            if not found.group(1):
                self.depth += 1
            elif self.depth:
                self.depth -= 1
            elif found.group(2) == self.key:
                value = self.pending[: found.start()]
                self.pending, self.state = self.pending[found.end() :], "parameters"
                parameters = self.parameters.get(self.function) or {}
                piece = argument_piece(parameters, self.key, value, not self.written, as_json)
                self.written += 1
                return [arguments_delta(self.calls - 1, piece)]
        # Read on from where a tag may yet be completed, not again from the last whole tag: a tag not yet
        # whole begins at the last namespace after it (no tag's name holds one), or at the text's end.
        last = self.pending.rfind(NS, self.seen)
        self.seen = last if last >= 0 else max(self.seen, len(self.pending) - len(NS) + 1)
        return []
