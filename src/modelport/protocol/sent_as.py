"""A 400 of the chat request another API's request becomes (a Responses request, Anthropic's Messages,
Ollama's chat and generate), renamed to what that request sent: the chat's own checks name the chat's fields
(`messages[k]…`, `max_completion_tokens`, `response_format.json_schema.schema…`,
`tools[i].function.parameters…`), which the caller never wrote."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from modelport.errors import InvalidRequestError

_MESSAGE = re.compile(r"messages\[(\d+)\]((?:\.\w+|\[\d+\])*)")
_TOOL = re.compile(r"tools\[(\d+)\]\.function(\.parameters)?")
# How the chat's checks write the answer's format and its schema, the longest first.
_FORMAT = ("response_format.json_schema.schema", "response_format.json_schema", "response_format")


@dataclass(frozen=True)
class Message:
    """Where a chat message came from in the request sent: `name` (`input[2]`, `system`), and whether what
    lies inside it (`.content[1]`) is named there as in the chat (a message made of parts of several, or
    of a field's text, is named whole)."""

    name: str
    inside: bool = False


@dataclass(frozen=True)
class SentAs:
    """How the request sent named what became each part of the chat request."""

    messages: Sequence[Message | None]  # each chat message's origin (None: not the request's own)
    fields: Mapping[str, str] = field(default_factory=dict)  # a chat field → the request's name of it
    tools: Sequence[str | None] = ()  # each chat tool's place in the request (`tools[2]`)
    tool_schema: str = "parameters"  # what the request calls a tool's parameters
    answer_format: tuple[str, str] | None = None  # where the request holds the answer's format, its schema


def rename(error: InvalidRequestError, sent: SentAs) -> None:
    """Name in `error` (its `param` and its message) what the chat's checks named, as `sent` says it was
    sent; what it cannot place is left as it is."""
    said = error.param or ""
    if said in sent.fields:  # a bare field, quoted where the message names it (`4 messages` is prose)
        error.message = error.message.replace(f"'{said}'", f"'{sent.fields[said]}'")
        error.param = sent.fields[said]
        return
    error.param = _named(said, sent)
    error.message = _named(error.message, sent)


@contextmanager
def renamed(sent: SentAs) -> Iterator[None]:
    """Within the block, a 400 of the chat's checks names what `sent` says was sent (`rename`)."""
    try:
        yield
    except InvalidRequestError as error:
        rename(error, sent)
        raise


def _named(text: str, sent: SentAs) -> str:
    """`text` with the chat's names of messages, tools and the answer's format as the request sent them."""
    text = _MESSAGE.sub(lambda found: _message(found, sent) or found[0], text)
    text = _TOOL.sub(lambda found: _tool(found, sent) or found[0], text)
    if sent.answer_format is not None:
        at, schema = sent.answer_format
        for chat, theirs in zip(_FORMAT, (schema, at, at), strict=True):
            text = text.replace(chat, theirs)
    return text


def _message(found: re.Match[str], sent: SentAs) -> str | None:
    k = int(found[1])
    origin = sent.messages[k] if k < len(sent.messages) else None
    if origin is None:
        return None
    return origin.name + found[2] if origin.inside else origin.name


def _tool(found: re.Match[str], sent: SentAs) -> str | None:
    i = int(found[1])
    place = sent.tools[i] if i < len(sent.tools) else None
    if place is None:
        return None
    return place + (f".{sent.tool_schema}" if found[2] else "")
