"""Reading a model's answer as it streams, by its format: each reader is fed the model's raw text piece by
piece and returns the deltas OpenAI streams (`reasoning_content`, `content`, `tool_calls`). A reader never
refuses text: what does not follow the format is the answer's content, with the format's markers removed.

Here: the reader of plain text, the reader of thinking between tags (which hands what follows the thinking
to the reader of the answer), the filter that keeps markers out of content, and the streamer of a call's
JSON arguments that the call syntaxes share.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from modelport.service.generation.formats.xml_values import ArgumentText

Delta = dict[str, Any]


class Reader(Protocol):
    """Reads one choice's answer as it streams."""

    @property
    def calls(self) -> int:
        """How many calls the answer has begun so far."""
        ...

    @property
    def thinking(self) -> bool:
        """Whether the text fed next is (or may be) the model's thinking."""
        ...

    @property
    def strayed(self) -> bool:
        """Whether the answer left its format (what followed was read as content)."""
        ...

    def feed(self, text: str) -> list[Delta]:
        """The deltas the text completes."""
        ...

    def flush(self, cut: bool) -> list[Delta]:
        """The deltas of text kept back, once the answer has ended (`cut`: by `max_tokens`)."""
        ...


class TextReader:
    """An answer that is text: its content as it comes."""

    calls = 0
    thinking = False
    strayed = False

    def feed(self, text: str) -> list[Delta]:
        return [{"content": text}] if text else []

    def flush(self, cut: bool) -> list[Delta]:
        return []


def argument_head(key: str, first: bool) -> str:
    """What opens an argument in its call's JSON arguments: `{"key": ` first, `, "key": ` after."""
    return ("{" if first else ", ") + f"{json.dumps(key)}: "


def escaped(text: str) -> str:
    """Text as it stands inside a JSON string."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def held(text: str, *markers: str) -> int:
    """How many characters at the end of `text` may begin one of `markers` (kept back until more comes)."""
    return next(
        (
            n
            for n in range(min(len(text), max(map(len, markers)) - 1), 0, -1)
            if any(m.startswith(text[-n:]) for m in markers)
        ),
        0,
    )


def until(text: str, marker: str) -> tuple[str, str, bool]:
    """`text` read up to `marker`: what comes before it, what is left to read, and whether it was found.
    Not found, the end of `text` that may begin it is what is left (kept back until more comes)."""
    at = text.find(marker)
    if at >= 0:
        return text[:at], text[at + len(marker) :], True
    cut = len(text) - held(text, marker)
    return text[:cut], text[cut:], False


def text_until(text: str, opener: str) -> tuple[str, str, bool]:
    """An answer's text read up to the `opener` of its calls: its content, what is left to read, and whether
    the calls opened. The whitespace before the calls is the format's, not content: whitespace at the end of
    the text is kept back until what follows says which it is."""
    content, rest, opened = until(text, opener)
    kept = content[len(content.rstrip()) :]
    if opened:
        return content[: len(content) - len(kept)], rest, True
    return content[: len(content) - len(kept)], kept + rest, False


class Stepped:
    """A reader that is a state machine over the text it holds back: each step reads what it can of
    `pending`, and feeding steps until a step changes neither the state nor what is held."""

    state: str
    pending: str

    def feed(self, text: str) -> list[Delta]:
        self.pending += text
        out: list[Delta] = []
        while True:
            before = (self.state, len(self.pending))
            out += self._step()
            if (self.state, len(self.pending)) == before:
                return out

    def _step(self) -> list[Delta]:
        raise NotImplementedError


class ThinkingReader(Stepped):
    """Thinking between an opening and a closing tag (`<think>…</think>`), then the answer, read by `answer`.
    Thinking that begins the answer (after any whitespace), or the whole answer when the prompt opened it
    (`opened`), is `reasoning_content`; whitespace between the thinking and the answer is dropped. An answer
    that does not open the tag is all answer; thinking the answer's end cuts is all thinking."""

    def __init__(self, open_tag: str, close_tag: str, opened: bool, answer: Reader) -> None:
        self.open, self.close = open_tag, close_tag
        self.answer = answer
        self.state = "thinking" if opened else "start"  # start, thinking, between, answer
        self.fresh = opened  # the prompt opened it and nothing is read yet: an opening written again is not
        self.pending = ""

    @property
    def calls(self) -> int:
        return self.answer.calls

    @property
    def thinking(self) -> bool:
        return self.state == "thinking"

    @property
    def strayed(self) -> bool:
        return self.answer.strayed

    def _step(self) -> list[Delta]:
        if self.state == "start":
            stripped = self.pending.lstrip()
            if stripped.startswith(self.open):
                self.pending, self.state = stripped[len(self.open) :], "thinking"
            elif stripped.startswith(self.close):  # no thinking, said by its closing alone (MiniMax M3)
                self.pending, self.state = stripped[len(self.close) :], "between"
            elif stripped and not (self.open.startswith(stripped) or self.close.startswith(stripped)):
                self.state = "answer"
            return []
        if self.state == "thinking":
            if self.fresh:  # Apriel 1.5 opens its thinking itself, where its prompt opened none
                rest = self._unopened()
                if rest is None:
                    return []  # perhaps the opening: wait for what follows it
                self.pending, self.fresh = rest, False
            thought, self.pending, closed = until(self.pending, self.close)
            if closed:
                self.state = "between"
            return [{"reasoning_content": thought}] if thought else []
        if self.state == "between":
            self.pending = self.pending.lstrip()
            if self.pending:
                self.state = "answer"
            return []
        text, self.pending = self.pending, ""
        return self.answer.feed(text) if text else []

    def _unopened(self) -> str | None:
        """What is pending without an opening written again and the whitespace after it; None while it may
        still be that opening."""
        stripped = self.pending.lstrip()
        if self.open.startswith(stripped):
            return None
        rest = stripped[len(self.open) :].lstrip() if stripped.startswith(self.open) else self.pending
        return rest or None

    def flush(self, cut: bool) -> list[Delta]:
        if self.state == "thinking" and self.fresh:
            self.pending = self._unopened() or ""
        text, self.pending = self.pending, ""
        if self.state == "thinking":
            return [{"reasoning_content": text}] if text else []
        if self.state == "start" and text.strip():
            return self.answer.feed(text) + self.answer.flush(cut)
        return self.answer.flush(cut)


class MarkerFilter:
    """Content with the format's markers taken out (a model that strays writes them where no reader looks
    for them); what may begin a marker is kept back until the next piece says."""

    def __init__(self, markers: tuple[str, ...]) -> None:
        self.markers = tuple(sorted(markers, key=len, reverse=True))
        self.pending = ""

    def feed(self, text: str) -> str:
        if not self.markers:
            return text
        self.pending += text
        for marker in self.markers:
            self.pending = self.pending.replace(marker, "")
        keep = held(self.pending, *self.markers)
        out, self.pending = self.pending[: len(self.pending) - keep], self.pending[len(self.pending) - keep :]
        return out

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return out


class Unframed:
    """An answer read without the markers its family frames its text in (Cohere's `<|START_RESPONSE|>`…
    `<|END_RESPONSE|>`): the text between them is what `inner` reads (its content, or modelport's JSON)."""

    def __init__(self, inner: Reader, frame: tuple[str, str]) -> None:
        self.inner, self.unframe = inner, MarkerFilter(frame)

    @property
    def calls(self) -> int:
        return self.inner.calls

    @property
    def thinking(self) -> bool:
        return self.inner.thinking

    @property
    def strayed(self) -> bool:
        return self.inner.strayed

    def feed(self, text: str) -> list[Delta]:
        text = self.unframe.feed(text)
        return self.inner.feed(text) if text else []

    def flush(self, cut: bool) -> list[Delta]:
        text = self.unframe.flush()
        return (self.inner.feed(text) if text else []) + self.inner.flush(cut)


class ArgumentsReader(Stepped):
    """A reader of calls whose arguments come one by one, each typed by its tool's schema (the XML syntaxes,
    LFM2's, Gemma 4's): what it keeps of the open call."""

    thinking = False

    def __init__(self, parameters: dict[str, dict[str, Any]]) -> None:
        self.parameters = parameters  # each tool's, by its name
        self.strayed = False
        self.pending = ""
        self.state = "text"
        self.calls = 0
        self.function = ""
        self.key = ""
        self.written = 0  # arguments written in the open call
        self.argument: ArgumentText | None = None  # the value being read (the tag syntaxes')

    inside: tuple[str, ...] = ()  # the states within a call's arguments, where an answer may end unclosed

    def closed(self) -> Delta:
        """The end of the open call's arguments: `}`, or `{}` where none was written."""
        return arguments_delta(self.calls - 1, "}" if self.written else "{}")

    def flush(self, cut: bool) -> list[Delta]:
        """Text kept back is content; arguments the answer ended within are closed, unless it was cut."""
        text, self.pending = self.pending, ""
        if self.state == "text":
            return [{"content": text}] if text else []
        if self.state in self.inside and not cut:
            ended = self._given(self.argument.end(text)) if self.argument is not None else []
            return [*ended, self.closed()]
        return []

    def _read_argument(self, pending: str, after: str) -> list[Delta]:
        """Read on in the open argument's value (`argument`): what of the call's arguments it gives out; the
        value closed, the state is `after`."""
        assert self.argument is not None
        piece, self.pending, closed = self.argument.take(pending)
        out = self._given(piece)
        if closed:
            self.argument, self.state = None, after
        return out

    def _given(self, piece: str) -> list[Delta]:
        """A piece of the open argument's JSON value as a piece of the call's arguments: its key first."""
        argument = self.argument
        if not piece or argument is None:
            return []
        if not argument.opened:
            piece, argument.opened = self._opening(piece), True
        return [arguments_delta(self.calls - 1, piece)]

    def _opening(self, piece: str) -> str:
        """`piece`, the first of the open argument's value, after what opens it (one more written)."""
        self.written += 1
        return argument_head(self.key, self.written == 1) + piece


class JsonArguments:
    """A call's arguments, written as one JSON object, streamed as written less the whitespace between
    tokens (OpenAI's are compact; a decoder lets a model indent); `done` once the object has closed."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False
        self.begun = False
        self.done = False

    def feed(self, text: str) -> tuple[str, str]:
        """The arguments' piece in `text`, and what follows the object once it has closed."""
        kept: list[str] = []
        for i, char in enumerate(text):
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
                self.begun = True
            elif char in "}]":
                self.depth -= 1
            elif not self.begun:  # a value that is not an object: taken as it is
                self.begun = True
            kept.append(char)
            if self.begun and self.depth <= 0 and not self.in_string and char in "}]":
                self.done = True
                return "".join(kept), text[i + 1 :]
        return "".join(kept), ""


def call_delta(index: int, name: str, legacy: bool = False) -> Delta:
    """The first delta of a call: its index, a new id, its name and no arguments yet."""
    if legacy:
        return {"function_call": {"name": name, "arguments": ""}}
    call_id = f"call_{uuid.uuid4().hex[:24]}"
    function = {"name": name, "arguments": ""}
    return {"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]}


def arguments_delta(index: int, piece: str, legacy: bool = False) -> Delta:
    """A piece of a call's arguments."""
    if legacy:
        return {"function_call": {"arguments": piece}}
    return {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
