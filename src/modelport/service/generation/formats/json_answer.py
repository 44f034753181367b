"""modelport's own answer for tool calling, read back as it streams: the JSON the decoder enforced
(`{"content": ...}` or `{"tool_calls": [{"name": ..., "arguments": {...}}]}`), rewritten into content and
tool-call deltas as OpenAI streams them. The JSON call syntaxes (`json_calls`) read their lists of calls with
it too."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from modelport.service.generation.formats.readers import Delta, JsonArguments, arguments_delta, call_delta

_OPEN = re.compile(r'\s*\{\s*"(content|tool_calls)"\s*:\s*(\[)?\s*')
# A call inside the list: `arguments` in our format, Hermes' and Mistral's; `parameters` in Llama 3's;
# Cohere's numbered, its name `tool_name`.
_CALL_NAMED = (
    r'\s*[\[,]?\s*\{\s*(?:"tool_call_id"\s*:\s*"[0-9]*"\s*,\s*)?"(?:tool_)?name"\s*:\s*"((?:[^"\\]|\\.)*)'
)
_CALL_START = re.compile(_CALL_NAMED + r'"\s*,\s*"(?:arguments|parameters)"\s*:\s*')
_CALL_END = re.compile(r"\s*\}")
_CALL_NAME = re.compile(_CALL_NAMED)  # its name as far as it goes


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
    arguments: JsonArguments | None = None  # of the call being read
    thinking = False  # the answer has no thinking in it

    @property
    def strayed(self) -> bool:
        """Whether the model answered in plain text instead of the enforced JSON."""
        return self.mode == "text"

    def flush(self, cut: bool) -> list[Delta]:
        """Text is given out as soon as it is known; a call cut before its arguments began is given out
        with the name so far and no arguments, as OpenAI gives out whatever a cut answer generated."""
        if not (cut and self.mode == "tool_calls" and not self.in_arguments and not self.closing):
            return []
        named = _CALL_NAME.match(self.buffer, self.pos)
        return [self._begin_call(named.group(1))] if named and named.group(1) else []

    def feed(self, text: str) -> list[Delta]:
        self.buffer += text
        out: list[Delta] = []
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

    def _content(self) -> list[Delta]:
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

    def _tool_calls(self) -> list[Delta]:
        out: list[Delta] = []
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
            self.in_arguments, self.arguments = True, JsonArguments()
            out.append(self._begin_call(match.group(1)))
        # The arguments pass on as written, less the whitespace between tokens.
        assert self.arguments is not None
        piece, rest = self.arguments.feed(self.buffer[self.pos :])
        self.pos = len(self.buffer) - len(rest)
        if piece:
            out.append(arguments_delta(self.calls - 1, piece, self.legacy))
        if self.arguments.done:
            self.in_arguments, self.closing = False, True
            self._close_call()
        return out

    def _begin_call(self, escaped_name: str) -> Delta:
        self.calls += 1
        return call_delta(self.calls - 1, json.loads(f'"{escaped_name}"'), self.legacy)

    def _close_call(self) -> None:
        """Step over the `}` that ends a call, once it has arrived."""
        end = _CALL_END.match(self.buffer, self.pos)
        if end:
            self.pos, self.closing = end.end(), False


def _could_open(text: str) -> bool:
    """Whether `text` may still grow into the start of the JSON answer."""
    stripped = text.lstrip()
    return stripped == "" or stripped.startswith("{")
