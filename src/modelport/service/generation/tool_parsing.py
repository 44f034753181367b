"""Reading a model's tool-calling answer back as it streams: the JSON answer modelport enforced
(`{"content": ...}` or `{"tool_calls": [...]}`), or a native format (`tool_formats`), rewritten into content
and tool-call deltas as OpenAI streams them."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from modelport.service.generation.accumulate import merge_delta
from modelport.service.generation.tool_plan import ToolPlan


class Parser(Protocol):
    """Reads a model's answer as it streams: `feed` returns the deltas its text completes."""

    @property
    def calls(self) -> int:
        """How many calls the answer has begun so far."""
        ...

    def feed(self, text: str) -> list[dict[str, Any]]: ...

    def flush(self, cut: bool) -> list[dict[str, Any]]:
        """The deltas of text kept back, once the answer has ended (`cut`: by `max_tokens`)."""
        ...


async def parse_stream(
    chunks: AsyncGenerator[dict[str, Any], None],
    plan: ToolPlan,
    new_parser: Callable[[], Parser] | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """Rewrite chunks whose content is the answer (our JSON format unless `new_parser` reads another)
    into content and tool-call deltas as OpenAI streams them; the last chunk of a choice that called a
    tool finishes with `tool_calls`."""
    new_parser = new_parser or (lambda: AnswerParser(plan.legacy))
    parsers: dict[int, Parser] = {}
    try:
        async for chunk in chunks:
            for choice in chunk.get("choices") or []:
                index = choice.get("index", 0)
                if index not in parsers:
                    parsers[index] = new_parser()
                parser = parsers[index]
                delta = choice.get("delta") or {}
                pieces = parser.feed(delta.pop("content", None) or "")
                if choice.get("finish_reason"):
                    pieces += parser.flush(choice["finish_reason"] == "length")
                if pieces:
                    merged: dict[str, Any] = {}
                    for piece in pieces:
                        merge_delta(merged, piece)
                    delta.update(merged)
                if delta.get("role") and "content" not in delta and "tool_calls" not in delta:
                    delta["content"] = None
                choice["delta"] = delta
                if choice.get("finish_reason") == "stop" and parser.calls:
                    choice["finish_reason"] = "function_call" if plan.legacy else "tool_calls"
            # Tokens of the JSON framing carry no text of their own: drop the chunks they leave empty.
            choices = [
                c
                for c in chunk.get("choices") or []
                if c["delta"] or c.get("finish_reason") or c.get("logprobs")
            ]
            if choices or chunk.get("usage") or not chunk.get("choices"):
                yield {**chunk, "choices": choices}
    finally:
        await chunks.aclose()


_OPEN = re.compile(r'\s*\{\s*"(content|tool_calls)"\s*:\s*(\[)?\s*')
# A call inside the list: `arguments` in our format, Hermes' and Mistral's; `parameters` in Llama 3's.
_CALL_START = re.compile(
    r'\s*[\[,]?\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"(?:arguments|parameters)"\s*:\s*'
)
_CALL_END = re.compile(r"\s*\}")
_CALL_NAME = re.compile(r'\s*[\[,]?\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)')  # its name as far as it goes


@dataclass
class AnswerParser:
    """Incremental reader of the enforced answer: emits deltas as soon as their text is known."""

    legacy: bool
    buffer: str = ""
    pos: int = 0
    mode: str | None = None  # "content", "tool_calls", "text" (not our format), "done"
    calls: int = 0
    in_arguments: bool = False
    closing: bool = False  # the arguments of a call ended; its closing brace is still to come
    depth: int = 0
    in_string: bool = False
    escaped: bool = False

    def flush(self, cut: bool) -> list[dict[str, Any]]:
        """Text is given out as soon as it is known; a call cut before its arguments began is given out
        with the name so far and no arguments, as OpenAI gives out whatever a cut answer generated."""
        if not (cut and self.mode == "tool_calls" and not self.in_arguments and not self.closing):
            return []
        named = _CALL_NAME.match(self.buffer, self.pos)
        return [self._begin_call(named.group(1))] if named and named.group(1) else []

    def feed(self, text: str) -> list[dict[str, Any]]:
        self.buffer += text
        out: list[dict[str, Any]] = []
        while True:
            before = (self.pos, self.mode, self.in_arguments)
            if self.mode is None:
                self._open()
            elif self.mode == "text":
                if self.pos < len(self.buffer):
                    out.append({"content": self.buffer[self.pos :]})
                    self.pos = len(self.buffer)
            elif self.mode == "content":
                out.extend(self._content())
            elif self.mode == "tool_calls":
                out.extend(self._tool_calls())
            if before == (self.pos, self.mode, self.in_arguments):
                return out

    def _open(self) -> None:
        rest = self.buffer[self.pos :]
        match = _OPEN.match(rest)
        if match and (match.group(1) == "content" or match.group(2)) and match.end() < len(rest):
            self.mode, self.pos = match.group(1), self.pos + match.end()
            if self.mode == "content":
                if self.buffer[self.pos] != '"':
                    self.mode = "text"
                else:
                    self.pos += 1
        elif rest.strip() and not _could_open(rest):
            self.mode = "text"  # a model that was not constrained answered in plain text

    def _content(self) -> list[dict[str, Any]]:
        text, i = [], self.pos
        while i < len(self.buffer):
            char = self.buffer[i]
            if char == '"':
                self.mode, i = "done", i + 1
                break
            if char == "\\":
                escape = (
                    self.buffer[i : i + 6] if self.buffer[i + 1 : i + 2] == "u" else self.buffer[i : i + 2]
                )
                if len(escape) < (6 if escape[1:2] == "u" else 2):
                    break  # the escape is not complete yet
                try:
                    text.append(json.loads(f'"{escape}"'))
                except json.JSONDecodeError:  # half a surrogate pair: wait for the other half
                    pair = self.buffer[i : i + 12]
                    if len(pair) < 12:
                        break
                    text.append(json.loads(f'"{pair}"'))
                    escape = pair
                i += len(escape)
                continue
            text.append(char)
            i += 1
        self.pos = i
        return [{"content": "".join(text)}] if text else []

    def _tool_calls(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self.in_arguments:
            if self.closing:
                self._close_call()
                if self.closing:
                    return out
            rest = self.buffer[self.pos :]
            match = _CALL_START.match(rest)
            if not match or match.end() == len(rest):
                if re.match(r"\s*\]", rest):
                    self.mode = "done"
                return out
            self.pos += match.end()
            self.in_arguments, self.depth = True, 0
            out.append(self._begin_call(match.group(1)))
        # The arguments pass on as written, less the whitespace between tokens: OpenAI's are compact, and
        # the decoder lets a model indent.
        kept, i = [], self.pos
        while i < len(self.buffer):
            char = self.buffer[i]
            i += 1
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif char == "\\":
                    self.escaped = True
                elif char == '"':
                    self.in_string = False
            elif char in " \t\n\r":
                continue
            elif char == '"':
                self.in_string = True
            elif char in "{[":
                self.depth += 1
            elif char in "}]":
                self.depth -= 1
            kept.append(char)
            if self.depth == 0 and not self.in_string:
                self.in_arguments = False
                break
        piece = "".join(kept)
        self.pos = i
        if piece:
            if self.legacy:
                out.append({"function_call": {"arguments": piece}})
            else:
                out.append({"tool_calls": [{"index": self.calls - 1, "function": {"arguments": piece}}]})
        if not self.in_arguments:
            self.closing = True
            self._close_call()
        return out

    def _begin_call(self, escaped_name: str) -> dict[str, Any]:
        self.calls += 1
        name = json.loads(f'"{escaped_name}"')
        if self.legacy:
            return {"function_call": {"name": name, "arguments": ""}}
        call_id = f"call_{uuid.uuid4().hex[:24]}"
        function = {"name": name, "arguments": ""}
        call = {"index": self.calls - 1, "id": call_id, "type": "function", "function": function}
        return {"tool_calls": [call]}

    def _close_call(self) -> None:
        """Step over the `}` that ends a call, once it has arrived."""
        end = _CALL_END.match(self.buffer, self.pos)
        if end:
            self.pos, self.closing = end.end(), False


def _could_open(text: str) -> bool:
    """Whether `text` may still grow into the start of the JSON answer."""
    stripped = text.lstrip()
    return stripped == "" or stripped.startswith("{")
