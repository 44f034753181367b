"""Native tool-call formats: for models whose chat template shows the tools itself, the decoder is held to
the call format the model was trained on, and the answer is parsed back into OpenAI's `tool_calls`.

- `hermes` (Hermes 2 Pro, Qwen 2.5/3): text, or one block per call:
  `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`.
- `llama3` (Llama 3.1-3.3): text, or the answer is one `{"name": ..., "parameters": {...}}`.
- `mistral`: text, or `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`.

The grammar (llguidance's Lark syntax, which llama.cpp takes as `grammar`) lets an `auto` answer be text
that does not begin like a call, or calls whose arguments validate against each tool's schema; `required`
and a named tool leave only the calls.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from modelport.predictors.parameter import TOOL_FORMATS
from modelport.service.generation.schema import compact as schema_compact
from modelport.service.generation.tool_parsing import AnswerParser
from modelport.service.generation.tool_plan import ToolPlan


@dataclass(frozen=True)
class ToolFormat:
    """How one family of templates and models writes tool calls."""

    name: str
    opener: str  # what starts the calls; "" when the answer itself is the call's JSON
    arguments: str  # the key that holds a call's arguments
    tags: tuple[str, ...] = ()  # wrappers around each call, dropped before the JSON is read
    parallel: bool = True

    def grammar(self, plan: ToolPlan, compact: bool = True) -> str:
        """The llguidance grammar of an answer that follows `plan` in this format (its JSON laid out
        compactly unless told otherwise)."""
        call, defs = plan.call_schema(self.arguments)
        if self.name == "hermes":
            block = '"<tool_call>\\n" call "\\n</tool_call>"'
            calls = f'{block} ("\\n" {block})*' if plan.parallel else block
            schema = call
        elif self.name == "mistral":
            calls, schema = '"[TOOL_CALLS]" call', plan.array(call)
        else:
            calls, schema = "call", call
        lines = ["%llguidance {}", "start: calls" if plan.required else "start: TEXT | calls"]
        lines += [
            f"calls: {calls}",
            f"call: %json {json.dumps(_laid_out({**schema, '$defs': defs} if defs else schema, compact))}",
        ]
        if not plan.required:
            first = (self.opener or "{")[0]
            lines.append(f"TEXT: /[^{_regex_escape(first)}](.|\\n)*/")
        return "\n".join(lines) + "\n"

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages as this family's templates accept them: Mistral's insist on 9-character call ids."""
        if self.name != "mistral":
            return messages

        def short(call_id: str) -> str:
            return hashlib.sha1(call_id.encode()).hexdigest()[:9]

        out = []
        for message in messages:
            message = dict(message)
            if message.get("tool_calls"):
                message["tool_calls"] = [
                    {**call, "id": short(call.get("id") or "")} for call in message["tool_calls"]
                ]
            if message.get("tool_call_id"):
                message["tool_call_id"] = short(message["tool_call_id"])
            out.append(message)
        return out


FORMATS = {
    "hermes": ToolFormat("hermes", "<tool_call>", "arguments", tags=("<tool_call>", "</tool_call>")),
    "llama3": ToolFormat("llama3", "", "parameters", parallel=False),
    "mistral": ToolFormat("mistral", "[TOOL_CALLS]", "arguments"),
}
assert tuple(FORMATS) == TOOL_FORMATS


class NativeParser:
    """Incremental reader of a native answer: text until the format's opener, then tool-call deltas."""

    def __init__(self, form: ToolFormat, legacy: bool) -> None:
        self.form = form
        self.inner = AnswerParser(legacy, mode="tool_calls")
        self.pending = ""
        self.in_calls: bool | None = None  # None: not known yet

    @property
    def calls(self) -> int:
        """How many calls the answer has begun so far."""
        return self.inner.calls

    def feed(self, text: str) -> list[dict[str, Any]]:
        self.pending += text
        if not self.in_calls:
            out = self._text()
            if not self.in_calls:
                return out
            return out + self._calls()
        return self._calls()

    def flush(self, cut: bool) -> list[dict[str, Any]]:
        """At the end of the answer: text kept back in case it began the opener was text after all."""
        if self.in_calls:
            return self.inner.flush(cut)
        text, self.pending = self.pending, ""
        return [{"content": text}] if text.strip() or self.in_calls is False else []

    def _text(self) -> list[dict[str, Any]]:
        opener = self.form.opener
        if not opener:  # the whole answer is a call or it is text, as its first character says
            if self.in_calls is None and self.pending.strip():
                self.in_calls = self.pending.lstrip().startswith("{")
            if self.in_calls or self.in_calls is None:
                return []
            text, self.pending = self.pending, ""
            return [{"content": text}]
        at = self.pending.find(opener)
        if at >= 0:
            text, self.pending, self.in_calls = self.pending[:at], self.pending[at + len(opener) :], True
        else:  # keep back what may be the start of the opener
            keep = next((n for n in range(len(opener) - 1, 0, -1) if self.pending.endswith(opener[:n])), 0)
            text, self.pending = (
                self.pending[: len(self.pending) - keep],
                self.pending[len(self.pending) - keep :],
            )
        return [{"content": text}] if text else []

    def _calls(self) -> list[dict[str, Any]]:
        text = self.pending
        for tag in self.form.tags:
            text = text.replace(tag, "")
        keep = next(
            (n for n in range(len(text), 0, -1) if any(t.startswith(text[-n:]) for t in self.form.tags)), 0
        )
        self.pending = text[len(text) - keep :]
        return self.inner.feed(text[: len(text) - keep])


def _regex_escape(char: str) -> str:
    return "\\" + char if char in "[]\\^-/" else char


def _laid_out(schema: dict[str, Any], compact: bool) -> dict[str, Any]:
    return schema_compact(schema) if compact else schema
