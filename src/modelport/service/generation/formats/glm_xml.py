"""GLM's tagged calls (GLM 4.5 to 4.7, and the families that took them up: Ling 3.0, Laguna, Spark): text, or
one block per call, `<tool_call>NAME`, then for each argument `<arg_key>KEY</arg_key>` and
`<arg_value>VALUE</arg_value>`, then `</tool_call>`; a line break after each part in GLM 4.5 and 4.6's
templates, none in 4.7's (the grammar takes either). A value is text: a string as it is, anything else as
JSON. Tencent Hy3's (`hy3`) are the same with every tag after `:opensource` (`<tool_call:opensource>`), a
`<tool_sep:opensource>` after the name, and the calls in one `<tool_calls:opensource>` block; K2 Horizon's
(`k2_horizon`) with every tag after `ifm|` (`<ifm|tool_call>`), in one `<ifm|tool_calls>` block.

The grammar holds each function's arguments to their order in its schema (the optional ones may be left
out) and each value to its type; the reader turns the blocks back into OpenAI's `tool_calls`, each argument
given out as its value closes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelport.predictors.family_marks import hy3_tag, ifm_tag
from modelport.service.generation.formats.call_lists import calls_or_text, listed
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

_BREAK = '"\\n"?'  # the line break GLM 4.5 and 4.6 write between the parts, and 4.7 does not


@dataclass(frozen=True)
class GlmTags:
    """The tags of one family's GLM-like calls: a call's, a key's and a value's (each an opening and a
    closing), the block around the calls (None: none) and what follows a call's name ("": nothing)."""

    call: tuple[str, str] = ("<tool_call>", "</tool_call>")
    key: tuple[str, str] = ("<arg_key>", "</arg_key>")
    value: tuple[str, str] = ("<arg_value>", "</arg_value>")
    block: tuple[str, str] | None = None
    sep: str = ""

    @classmethod
    def named(cls, tag: Callable[[str], str], sep: str = "") -> GlmTags:
        """A family's tags made from GLM's names by `tag` (`tool_call` → `<tool_call:opensource>`, and
        `/tool_call` its closing), its calls in a block."""

        def pair(name: str) -> tuple[str, str]:
            return tag(name), tag(f"/{name}")

        return cls(pair("tool_call"), pair("arg_key"), pair("arg_value"), pair("tool_calls"), sep)


HY3_TAGS = GlmTags.named(hy3_tag, hy3_tag("tool_sep"))
K2_HORIZON_TAGS = GlmTags.named(ifm_tag)


class GlmXml:
    """GLM's call syntax, or a family's that took it up with tags of its own."""

    arguments = "arguments"

    def __init__(self, name: str = "glm_xml", tags: GlmTags = GlmTags()) -> None:
        self.name, self.tags = name, tags

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of an answer that follows `plan`: the calls (in their block, where the family has one), or
        (unless one is required) text that does not begin like one."""
        functions = [self._function(tool, i, grammar, compact) for i, tool in enumerate(plan.tools)]
        tags = self.tags
        if tags.block is None:
            return tagged_calls(plan, grammar, functions, tags.call, _BREAK)
        function = grammar.rule("function", " | ".join(functions))
        opening, closing = (grammar.literal(tag) for tag in tags.call)
        call = grammar.rule("block", f"{opening} {function} {closing} {_BREAK}")
        begins, ends = (grammar.literal(tag) for tag in tags.block)
        return calls_or_text(
            plan, grammar, grammar.rule("calls", f"{begins} {_BREAK} {listed(plan, call)} {ends}")
        )

    def _function(self, tool: dict[str, Any], i: int, grammar: Grammar, compact: bool) -> str:
        key, value = self.tags.key, self.tags.value

        def opening(name: str) -> str:
            return f"{grammar.literal(f'{key[0]}{name}{key[1]}')} {_BREAK} {grammar.literal(value[0])}"

        head = f"{grammar.literal(tool['name'] + self.tags.sep)} {_BREAK}"
        return tagged_function(tool, i, grammar, compact, head, opening, value[1], _BREAK)

    def reader(self, plan: ToolPlan) -> GlmReader:
        """A reader of one answer in this syntax."""
        return GlmReader({tool["name"]: tool.get("parameters") or {} for tool in plan.tools}, self.tags)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages


class K2Horizon(GlmXml):
    """K2 Horizon's: GLM's calls with every tag after `ifm|`, in a block. Its template refuses an assistant
    turn without thinking, and llama.cpp drops an empty `reasoning_content` before the template sees it: a
    turn given back without its thinking (as OpenAI's clients give them) is given a space of it, which the
    template writes as the empty thinking block it writes for none, the space within."""

    def __init__(self) -> None:
        super().__init__("k2_horizon", K2_HORIZON_TAGS)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        def thought(message: dict[str, Any]) -> dict[str, Any]:
            if message.get("role") != "assistant" or message.get("reasoning_content"):
                return message
            return {**message, "reasoning_content": " "}

        return [thought(message) for message in messages]


class GlmReader(ArgumentsReader):
    """An answer in GLM's syntax: text until `<tool_call>` (or the block of calls), then each call's name as
    its first part ends and each argument as its value closes (typed by the tool's schema). Its states: text,
    name, arguments, value, between (after `</tool_call>`, or the block's opening)."""

    def __init__(self, parameters: dict[str, dict[str, Any]], tags: GlmTags) -> None:
        super().__init__(parameters)
        self.tags = tags

    inside = ("arguments", "value")

    def flush(self, cut: bool) -> list[Delta]:
        name = self.pending.strip()
        if self.state == "name" and name and not cut:  # a call of no arguments, unclosed
            self.pending = ""
            return [*self._named(name), self.closed()]
        return super().flush(cut)

    def _named(self, name: str) -> list[Delta]:
        self.function, self.state, self.written = name, "arguments", 0
        self.calls += 1
        return [call_delta(self.calls - 1, name)]

    def _step(self) -> list[Delta]:
        pending, tags = self.pending, self.tags
        (opens, closes), (key, end_key), (value, _) = tags.call, tags.key, tags.value
        if self.state in ("text", "between"):
            if self.state == "between":  # the line break between two calls is the format's
                stripped = pending.lstrip()
                if tags.block is not None and stripped.startswith(tags.block[1]):
                    self.pending, self.state = stripped[len(tags.block[1]) :], "text"
                    return []
                if (
                    not stripped
                    or opens.startswith(stripped)
                    or (tags.block or ("", ""))[1].startswith(stripped)
                ):
                    return []
                if not stripped.startswith(opens):
                    self.state = "text"
                pending = self.pending = stripped
            if self.state == "text" and tags.block is not None:
                text, self.pending, opened = until(pending, tags.block[0])
                if opened:  # the whitespace before the block is the template's, as before a call
                    self.state = "between"
                    return [{"content": text}] if text.strip() else []
                return [{"content": text}] if text else []
            text, self.pending, opened = until(pending, opens)
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
            if tags.sep and stripped.startswith(tags.sep):  # what follows a name (Hy3's `<tool_sep>`)
                self.pending = stripped[len(tags.sep) :]
                return []
            if stripped.startswith(key):
                end = stripped.find(end_key)
                if end < 0:
                    return []
                after = stripped[end + len(end_key) :].lstrip()
                if len(after) < len(value) and value.startswith(after):
                    return []
                if not after.startswith(value):
                    self.pending, self.state, self.strayed = after, "text", True
                    return [self.closed()]
                self.key, self.pending, self.state = stripped[len(key) : end], after[len(value) :], "value"
                schema = parameter_schema(self.parameters.get(self.function), self.key)
                self.argument = ArgumentText(tags.value[1], schema)
                return []
            if stripped.startswith(closes):
                self.pending, self.state = stripped[len(closes) :], "between"
                return [self.closed()]
            held = (key, closes, tags.sep) if tags.sep else (key, closes)
            if stripped and not any(tag.startswith(stripped) for tag in held):
                self.pending, self.state, self.strayed = stripped, "text", True
                return [self.closed()]
            self.pending = stripped
            return []
        return self._read_argument(pending, "arguments")  # value: up to its closing tag
