"""Call syntaxes whose calls are JSON objects:
- `hermes` (Hermes 2 Pro, Qwen 2.5/3): text, or a block a call, `<tool_call>\\n{"name": ..., "arguments":
  {...}}\\n</tool_call>`; `minimax_m1` (MiniMax M1): an object a line in one `<tool_calls>` block;
- `llama3` (Llama 3.1-3.3): text, or the answer is one `{"name": ..., "parameters": {...}}`; `gigachat`
  (GigaChat 3.1): one object after `<|function_call|>`; `gigachat_message` (GigaChat 3.0): one a message of
  its own, after `<|message_sep|>\n\nfunction call<|role_sep|>\n`;
- `mistral` (Mistral Nemo): text, or `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`; `granite` the
  same after `<|tool_call|>` (Granite 3.x); `nemotron` the same between `<TOOLCALL>` and `</TOOLCALL>`
  (Nemotron Nano 2), `apriel` between `<tool_calls>` and `</tool_calls>` (Apriel 1.6), `apriel_framed` the
  same in a final response that "[END FINAL RESPONSE]" ends (Apriel 1.5); `cohere` and
  `cohere_text` numbered between `<|START_ACTION|>` and `<|END_ACTION|>` (Command R7B, Command A, Cohere's
  MoE models), their text framed;
- `mistral_args` (Mistral Small 3.2, Devstral, Ministral 3, Magistral): text, or for each call
  `[TOOL_CALLS]NAME`, `[CALL_ID]` and an id where Small 3.2 writes one, then `[ARGS]{...}`.

The grammar lets an `auto` answer be text that does not begin like a call, or calls whose arguments validate
against each tool's schema; `required` and a named tool leave only the calls.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar

from modelport.predictors.family_marks import FRAMES
from modelport.protocol.validation import json_value
from modelport.service.generation.formats.call_lists import calls_or_framed
from modelport.service.generation.formats.json_answer import AnswerParser
from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import (
    Delta,
    JsonArguments,
    Stepped,
    arguments_delta,
    call_delta,
    text_until,
    until,
)
from modelport.service.generation.tools.plan import ToolPlan
from modelport.service.generation.tools.render import content_text


class JsonCalls:
    """A syntax whose calls are JSON objects after an opener (`hermes`: in tags)."""

    name = ""
    opener = ""  # what starts the calls; "" when the answer itself is the call's JSON
    arguments = "arguments"  # the key that holds a call's arguments
    named = "name"  # the key that holds its name
    first: ClassVar[dict[str, Any]] = {}  # the schemas of the keys a call begins with, before its name
    tags: tuple[str, ...] = ()  # wrappers around each call, dropped before the JSON is read

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of an answer that follows `plan` in this syntax (its JSON laid out compactly unless
        told otherwise): the calls, or (unless a call is required) text that does not begin like one."""
        calls = self.calls(plan, grammar, compact)
        if plan.required:
            return calls
        text = grammar.text_lexeme("text", not_first=(self.opener or "{")[0])
        return grammar.rule("answer", f"{text} | {calls}")

    def calls(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        return grammar.rule("calls", self.call_rule(plan, grammar, compact))

    def call(self, plan: ToolPlan) -> tuple[dict[str, Any], dict[str, Any]]:
        """The schema of one call in this syntax, and the `$defs` it needs."""
        return plan.call_schema(self.arguments, self.named, self.first)

    def call_rule(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        """The rule of one call's JSON."""
        call, defs = self.call(plan)
        return grammar.json("call", {**call, "$defs": defs} if defs else call, compact)

    def reader(self, plan: ToolPlan) -> NativeReader:
        """A reader of one answer in this syntax."""
        return NativeReader(self, plan.legacy)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages as this family's templates accept them."""
        return messages


class Hermes(JsonCalls):
    name, opener, tags = "hermes", "<tool_call>", ("<tool_call>", "</tool_call>")

    def calls(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        json_rule = self.call_rule(plan, grammar, compact)
        opening, closing = grammar.literal("<tool_call>\n"), grammar.literal("\n</tool_call>")
        block = grammar.rule("block", f"{opening} {json_rule} {closing}")
        return grammar.rule("calls", f'{block} ("\\n" {block})*' if plan.parallel else block)


class Llama3(JsonCalls):
    name, arguments = "llama3", "parameters"


class Mistral(JsonCalls):
    name, opener = "mistral", "[TOOL_CALLS]"
    closer = ""  # what ends the list, where the syntax has it

    def calls(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        call, defs = self.call(plan)
        schema = plan.array(call)
        listed = grammar.json("call", {**schema, "$defs": defs} if defs else schema, compact)
        closing = f" {grammar.literal(self.closer)}" if self.closer else ""
        return grammar.rule("calls", f"{grammar.literal(self.opener)} {listed}{closing}")

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Mistral's templates insist on 9-character call ids."""

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


class Granite(Mistral):
    """Granite 3.x's: `<|tool_call|>` and then the list of calls, as Mistral Nemo's. Its templates show a
    message's text only, so a call given back is written into the text as the model wrote it."""

    name, opener = "granite", "<|tool_call|>"

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for message in messages:
            if message.get("role") == "assistant" and message.get("tool_calls"):
                functions = [call["function"] for call in message["tool_calls"]]
                listed = [
                    {"name": f["name"], "arguments": arguments_object(f.get("arguments"))} for f in functions
                ]
                said = f"{content_text(message.get('content'))}{self.opener}{json.dumps(listed)}"
                message = {k: v for k, v in message.items() if k != "tool_calls"} | {"content": said}
            out.append(message)
        return out


class Nemotron(Mistral):
    """NVIDIA Nemotron Nano 2's: the list of calls between `<TOOLCALL>` and `</TOOLCALL>`; its template writes
    a call given back itself, with any id."""

    name, opener, closer = "nemotron", "<TOOLCALL>", "</TOOLCALL>"
    tags = (closer,)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages


class Apriel(Nemotron):
    """Apriel 1.6's: the list of calls between `<tool_calls>` and `</tool_calls>`, after its thinking (which
    its prompt opens); its template writes a call given back itself, with its id."""

    name, opener, closer = "apriel", "<tool_calls>", "</tool_calls>"
    tags = (closer,)


class AprielFramed(Apriel):
    """Apriel 1.5's: Apriel 1.6's list of calls, in its final response (after its thinking's end, "[BEGIN
    FINAL RESPONSE]"), which "[END FINAL RESPONSE]" ends; its text is the final response's."""

    name = "apriel_framed"

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        frame = FRAMES[self.name]
        ended = grammar.rule("ended", f"{self.calls(plan, grammar, compact)} ({grammar.literal(frame[1])})?")
        return calls_or_framed(plan, grammar, ended, frame, opened=True)


class MiniMaxM1(Hermes):
    """MiniMax M1's: its calls one JSON object a line in one `<tool_calls>` block; its template writes the
    calls given back itself."""

    name, opener, tags = "minimax_m1", "<tool_calls>", ("<tool_calls>", "</tool_calls>")

    def calls(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        json_rule = self.call_rule(plan, grammar, compact)
        listed = f'{json_rule} ("\\n" {json_rule})*' if plan.parallel else json_rule
        opening, closing = grammar.literal("<tool_calls>\n"), grammar.literal("\n</tool_calls>")
        return grammar.rule("calls", f"{opening} {listed} {closing}")


class GigaChat(JsonCalls):
    """GigaChat 3.1's: `<|function_call|>` and one call's JSON (its template shows one call a message, and
    writes the call given back itself)."""

    name, opener = "gigachat", "<|function_call|>"

    def calls(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        call = self.call_rule(plan, grammar, compact)
        return grammar.rule("calls", f"{grammar.literal(self.opener)} {call}")


class GigaChatMessage(GigaChat):
    """GigaChat 3.0's: a call is a message of its own, `function call`'s, and its JSON (its template shows one
    call a message, and writes the call given back itself)."""

    name, opener = "gigachat_message", "<|message_sep|>\n\nfunction call<|role_sep|>\n"
    end = "<|message_sep|>"  # of its text's message: the answer may end with it

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        calls = self.calls(plan, grammar, compact)
        if plan.required:
            return calls
        text = grammar.text_lexeme("text", self.end, not_first="<")
        return grammar.rule("answer", f"{text} ({grammar.literal(self.end)})? | {calls}")


class Cohere(Mistral):
    """Cohere's (Command R7B, Command A and its MoE models): the list of calls between `<|START_ACTION|>` and
    `<|END_ACTION|>`, each numbered (`tool_call_id`), its name `tool_name` and its arguments `parameters`;
    text between the markers of its frame (`<|START_RESPONSE|>` and `<|END_RESPONSE|>`, or the MoE models'
    `<|START_TEXT|>` and `<|END_TEXT|>`). Its templates write a call given back themselves, numbering them."""

    opener, closer = "<|START_ACTION|>", "<|END_ACTION|>"
    tags = (closer,)
    arguments, named = "parameters", "tool_name"
    first: ClassVar[dict[str, Any]] = {"tool_call_id": {"type": "string", "pattern": "^[0-9]{1,9}$"}}

    def __init__(self, name: str) -> None:
        self.name = name
        self.frame = FRAMES[name]

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        return calls_or_framed(plan, grammar, self.calls(plan, grammar, compact), self.frame)

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return messages


def arguments_object(arguments: Any) -> Any:
    """A call's arguments as the object they are (a string of JSON, as OpenAI gives them)."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json_value(arguments)
    except ValueError:
        return arguments


class MistralArgs(Mistral):
    """Mistral's later syntax: a call's name and its arguments apart, each call after its own opener."""

    name = "mistral_args"

    def calls(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str:
        calls = []
        for i, tool in enumerate(plan.tools):
            parameters = tool.get("parameters") or {"type": "object", "properties": {}}
            arguments = grammar.json(f"args{i}", parameters, compact)
            call_id = grammar.rule(f"CALL_ID{i}", "/[A-Za-z0-9]{9}/")
            named = grammar.literal(_TOOL_CALLS + tool["name"])
            opening = f"{named} ({grammar.literal(_CALL_ID)} {call_id})?"
            calls.append(grammar.rule(f"call{i}", f"{opening} {grammar.literal(_ARGS)} {arguments}"))
        call = grammar.rule("call", " | ".join(calls))
        return grammar.rule("calls", f"{call}+" if plan.parallel else call)

    def reader(self, plan: ToolPlan) -> ArgsReader:  # type: ignore[override]
        """A reader of one answer in this syntax."""
        return ArgsReader(plan.legacy)


class ArgsReader(Stepped):
    """An answer in Mistral's later syntax: text until `[TOOL_CALLS]`, then each call's name as `[ARGS]` (or
    `[CALL_ID]`) ends it, and its arguments as they are written."""

    thinking = False

    def __init__(self, legacy: bool) -> None:
        self.legacy = legacy
        self.strayed = False
        self.pending = ""
        self.state = "text"  # text, name, call_id, arguments, between
        self.calls = 0
        self.arguments = JsonArguments()

    def flush(self, cut: bool) -> list[Delta]:
        text, self.pending = self.pending, ""
        if self.state == "text":
            return [{"content": text}] if text else []
        if self.state == "arguments" and not self.arguments.begun and not cut:
            return [arguments_delta(self.calls - 1, "{}", self.legacy)]
        return []

    def _step(self) -> list[Delta]:
        pending = self.pending
        if self.state in ("text", "between"):
            # The whitespace before the calls is the format's (kept back until what follows says so).
            text, self.pending, opened = text_until(pending, _TOOL_CALLS)
            between, self.state = self.state == "between", "name" if opened else self.state
            if between and text.strip():  # text after the calls: taken as it is
                self.strayed = True
                self.state = self.state if opened else "text"
            elif between or (opened and not text.strip()):  # the whitespace around calls is the format's
                return []
            return [{"content": text}] if text else []
        if self.state == "name":
            ends = [at for at in (pending.find(_ARGS), pending.find(_CALL_ID)) if at >= 0]
            if not ends:
                return []
            end = min(ends)
            self.pending = pending[end:]
            self.calls += 1
            self.state = "call_id" if pending.startswith(_CALL_ID, end) else "arguments"
            if self.state == "arguments":
                self.pending = self.pending[len(_ARGS) :]
            self.arguments = JsonArguments()
            return [call_delta(self.calls - 1, pending[:end].strip(), self.legacy)]
        if self.state == "call_id":  # an id of the model's own: the server's stands
            text, self.pending, found = until(pending, _ARGS)
            if found:
                self.state = "arguments"
            return []
        piece, rest = self.arguments.feed(pending)
        self.pending = rest
        if self.arguments.done:
            self.state = "between"
        return [arguments_delta(self.calls - 1, piece, self.legacy)] if piece else []


_TOOL_CALLS, _ARGS, _CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"


class NativeReader:
    """An answer in a JSON call syntax: text until the syntax's opener, then tool-call deltas."""

    thinking = False

    def __init__(self, syntax: JsonCalls, legacy: bool) -> None:
        self.syntax = syntax
        self.inner = AnswerParser(legacy, mode="tool_calls")
        self.pending = ""
        self.in_calls: bool | None = None  # None: not known yet

    @property
    def calls(self) -> int:
        return self.inner.calls

    @property
    def strayed(self) -> bool:
        return self.inner.strayed

    def feed(self, text: str) -> list[Delta]:
        self.pending += text
        if not self.in_calls:
            out = self._text()
            if not self.in_calls:
                return out
            return out + self._calls()
        return self._calls()

    def flush(self, cut: bool) -> list[Delta]:
        """At the end of the answer: text kept back in case it began the opener (or, whitespace, came before
        it) was text after all."""
        if self.in_calls:
            return self.inner.flush(cut)
        text, self.pending = self.pending, ""
        said = text.strip() or self.in_calls is False or self.syntax.opener  # an answer of text says it all
        return [{"content": text}] if text and said else []

    def _text(self) -> list[Delta]:
        opener = self.syntax.opener
        if not opener:  # the whole answer is a call or it is text, as its first character says
            if self.in_calls is None and self.pending.strip():
                self.in_calls = self.pending.lstrip().startswith("{")
            if self.in_calls or self.in_calls is None:
                return []
            text, self.pending = self.pending, ""
            return [{"content": text}]
        # The whitespace before the calls is the format's, not the answer's (any: a model of SmolLM2's first
        # blocks wrote a no-break space there).
        text, self.pending, opened = text_until(self.pending, opener)
        if opened:
            self.in_calls = True
        return [{"content": text}] if text else []

    def _calls(self) -> list[Delta]:
        text = self.pending
        tags = self.syntax.tags
        for tag in tags:
            text = text.replace(tag, "")
        keep = next((n for n in range(len(text), 0, -1) if any(t.startswith(text[-n:]) for t in tags)), 0)
        self.pending = text[len(text) - keep :]
        return self.inner.feed(text[: len(text) - keep])
