"""OpenAI's harmony format (gpt-oss): an answer is a run of messages, each on a channel. `analysis` holds the
thinking; `commentary` addressed `to=functions.NAME`, with `<|constrain|>json`, holds a call's arguments;
`final` holds the answer; each message ends with `<|end|>` (the last with `<|return|>` or `<|call|>`, where
generation stops) and the next begins `<|start|>assistant`. The generation prompt ends with
`<|start|>assistant`, so the model writes the first channel itself.

The grammar: an optional analysis, bounded by the thinking budget, then the final answer (text, or JSON
under a schema or modelport's JSON for tools) or, where tools are offered, a call in the commentary channel;
`required` leaves only the call. The reader turns each channel into OpenAI's deltas; text outside any
channel (a model that strays) is content, with harmony's markers taken out.
"""

from __future__ import annotations

import re
from typing import Any

from modelport.predictors.family_marks import HARMONY
from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.readers import (
    Delta,
    JsonArguments,
    Reader,
    Stepped,
    arguments_delta,
    call_delta,
    held,
)
from modelport.service.generation.tools.plan import ToolPlan

_START, _END, _MESSAGE, _CHANNEL = HARMONY["start"], HARMONY["end"], HARMONY["message"], HARMONY["channel"]
_CONSTRAIN, _RETURN, _CALL = HARMONY["constrain"], HARMONY["return"], HARMONY["call"]
_ENDINGS = (_END, _CALL, _RETURN)
_NEXT = f"{_START}assistant"
_HEADER = re.compile(r"(?:<\|channel\|>\s*(?P<channel>\w+))|(?:to=(?P<recipient>[\w.\-]+))")


def answer(
    grammar: Grammar,
    thought: int | None,
    body: str | None,
    plan: ToolPlan | None,
    compact: bool,
) -> str:
    """The rule of a whole harmony answer: an analysis bounded to `thought` tokens (None: no analysis at
    all, as `none` effort asks; the analysis is otherwise optional), then the final channel holding `body`
    (a rule; None: free text) or a call of one of `plan`'s tools."""
    g = grammar
    parts = []
    if thought is not None:
        bounded = g.until("thought", _END, thought)  # the analysis and the `<|end|>` that closes it
        opening, next_one = g.literal(f"{_CHANNEL}analysis{_MESSAGE}"), g.literal(_NEXT)
        parts.append(g.rule("analysis", f"{opening} {bounded} {next_one}") + "?")
    # Each answer ends with the marker that ends generation (`<|return|>`, `<|call|>`): ended by the grammar's
    # own end instead, a model whose end-of-turn token is not among those that stop generation (llama.cpp
    # takes `<|end|>` for gpt-oss's) would go on past it unconstrained.
    final_body = body if body is not None else g.text_lexeme("final_text", *_ENDINGS, _START, _CHANNEL) + "?"
    final = g.rule("final", f"{g.literal(f'{_CHANNEL}final{_MESSAGE}')} {final_body} {g.literal(_RETURN)}")
    reply = final
    if plan is not None:
        calls = []
        for i, tool in enumerate(plan.tools):
            parameters = tool.get("parameters") or {"type": "object"}
            arguments = g.json(f"arguments{i}", parameters, compact)
            header = g.literal(f"{tool['name']} {_CONSTRAIN}json{_MESSAGE}")
            calls.append(g.rule(f"callee{i}", f"{header} {arguments} {g.literal(_CALL)}"))
        call = g.rule("call", f"{g.literal(f'{_CHANNEL}commentary to=functions.')} ({' | '.join(calls)})")
        reply = call if plan.required else g.rule("reply", f"{final} | {call}")
    return g.rule("start", " ".join([*parts, reply]))


class HarmonyReader(Stepped):
    """One harmony answer: `analysis` as reasoning, `final` (and commentary addressed to no one: a preamble
    the user sees) as content read by `answer`, a call addressed `to=functions.NAME` as a tool call."""

    def __init__(self, answer: Reader, legacy: bool = False) -> None:
        self.answer = answer
        self.legacy = legacy
        self.pending = ""
        self.state = "header"  # header, analysis, final, arguments, after (the call's arguments closed)
        self.own_calls = 0
        self.arguments: JsonArguments | None = None
        self.answered = False  # a final or a call has begun
        self.strayed = False

    @property
    def calls(self) -> int:
        return self.own_calls + self.answer.calls

    @property
    def thinking(self) -> bool:
        return self.state == "analysis"

    def flush(self, cut: bool) -> list[Delta]:
        text, self.pending = self.pending, ""
        if self.state == "analysis":
            return [{"reasoning_content": text}] if text else []
        if self.state == "final":
            return (self.answer.feed(text) if text else []) + self.answer.flush(cut)
        if self.state == "header" and text.strip() and not self.answered:
            self.strayed = True
            return self.answer.feed(_unmarked(text)) + self.answer.flush(cut)
        return self.answer.flush(cut) if self.state != "arguments" else []

    def _step(self) -> list[Delta]:
        if self.state == "header":
            return self._header()
        if self.state == "arguments":
            assert self.arguments is not None
            piece, rest = self.arguments.feed(self.pending)
            self.pending = rest
            out = [arguments_delta(self.own_calls - 1, piece, self.legacy)] if piece else []
            if self.arguments.done:
                self.state = "after"
            return out
        at, ending = _first(self.pending, _ENDINGS)
        body = self.pending if at < 0 else self.pending[:at]
        if at < 0:
            keep = held(body, *_ENDINGS)
            body, self.pending = body[: len(body) - keep], body[len(body) - keep :]
        else:
            self.pending = self.pending[at + len(ending) :]
        state = self.state
        if at >= 0:
            self.state = "header"
        if state == "analysis":
            return [{"reasoning_content": body}] if body else []
        if state == "final":
            return self.answer.feed(body) if body else []
        return []  # after a call's arguments: what is left of its message

    def _header(self) -> list[Delta]:
        """Read a message's header up to `<|message|>`; what cannot be one is the answer's text."""
        pending = self.pending
        if pending.startswith(_NEXT):
            self.pending = pending = pending[len(_NEXT) :]
        at = pending.find(_MESSAGE)
        if at < 0:
            lead = pending.lstrip()
            if lead and not (lead.startswith((_CHANNEL, "to=", " to=", _CONSTRAIN)) or _could_begin(lead)):
                self.pending, self.state, self.answered = _unmarked(pending), "final", True
                self.strayed = True
            return []
        header, self.pending = pending[:at], pending[at + len(_MESSAGE) :]
        fields = {k: v for found in _HEADER.finditer(header) for k, v in found.groupdict().items() if v}
        channel, recipient = fields.get("channel", "final"), fields.get("recipient", "")
        if recipient.startswith("functions."):
            self.own_calls += 1
            self.answered, self.state = True, "arguments"
            self.arguments = JsonArguments()
            return [call_delta(self.own_calls - 1, recipient[len("functions.") :], self.legacy)]
        if channel == "analysis" and not self.answered:
            self.state = "analysis"
        else:  # final, or commentary the user sees (a preamble)
            self.state, self.answered = "final", True
        return []


def _first(text: str, endings: tuple[str, ...]) -> tuple[int, str]:
    found = [(text.find(e), e) for e in endings if e in text]
    return min(found) if found else (-1, "")


def _could_begin(text: str) -> bool:
    return any(marker.startswith(text) for marker in (_NEXT, _CHANNEL, _CONSTRAIN, " to="))


def _unmarked(text: str) -> str:
    for marker in sorted(HARMONY.values(), key=len, reverse=True):
        text = text.replace(marker, "")
    return text


def history(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as harmony templates take them: an assistant message that calls tools carries its thinking
    and no content (gpt-oss's template refuses both)."""
    out = []
    for message in messages:
        if (
            message.get("role") == "assistant"
            and message.get("tool_calls")
            and message.get("reasoning_content")
        ):
            message = {**message, "content": None}
        out.append(message)
    return out
