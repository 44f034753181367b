"""The three shapes of every answer the service gives: a whole object (an `openai` type, a list page, a
JSON dict), a stream of events (`Events`), or bytes with a media type (`Binary`).

Each face renders these three and nothing else: the HTTP server as JSON, server-sent events, NUL-delimited
frames or a body; the in-process client as the `openai` package's objects and stream wrappers; the batch
runner as result lines; the Ray replica as the items it sends the ingress. An event stream carries its
`EventKind`, which says how its events look on the wire and in-process and folds them into the whole object
they complete into, so whoever needs the whole answer of a stream asks for it instead of merging deltas.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol

import orjson
from pydantic import BaseModel
from typing_extensions import TypeVar

Event = dict[str, Any]  # one event as the wire carries it: a JSON object
W = TypeVar("W")  # the whole object a stream completes into
# An event as the service passes it on: the `openai` type it is (a chat chunk), or, for the kinds that have
# none of their own here, the JSON object the wire carries.
E = TypeVar("E", default=Event)
T = TypeVar("T")
U = TypeVar("U")


class Fold(Protocol):
    """Takes a stream's events one by one and gives the whole object they make (as the wire carries it)."""

    def add(self, event: Any) -> None:
        """Take one event (as its kind passes it on)."""
        ...

    def whole(self) -> Any:
        """The whole object, from the events taken so far (as the wire carries it, or typed)."""
        ...


class LastEvent:
    """The fold of a stream whose last event is its whole answer."""

    def __init__(self) -> None:
        self.last: Event = {}

    def add(self, event: Event) -> None:
        """Keep the event."""
        self.last = event

    def whole(self) -> Event:
        """The last event."""
        return self.last


def _as_is(event: Any) -> Any:
    return event


@dataclass(frozen=True)
class EventKind(Generic[W, E]):
    """How one endpoint's events look: on the wire as server-sent events (an `event:` line naming each, as
    the Responses API sends them; `data: [DONE]` after the last, as chat completions end) or as JSON objects
    each followed by a NUL byte (vLLM's `/generate`); as the service passes them on (`E`: the `openai` type
    they were built as, or the JSON objects the wire carries, which `parse` types where they are read back);
    in-process as `event(...)` makes them; and the whole object that `fold` and `whole(...)` make of them.

    Chat and completion chunks stay the engine's JSON objects: typed one by one, they cost the serving
    thread 0.08 ms more a streamed token (docs/benchmarks.md), and are typed where a face hands them out."""

    name: str
    fold: Callable[[], Fold] = LastEvent
    parse: Callable[[Event], E] = _as_is
    event: Callable[[E], Any] = _as_is
    whole: Callable[[Any], W] = _as_is
    framing: Literal["sse", "nul"] = "sse"
    named: bool = False
    done: bool = False
    # Event types whose fields never hold a subclass of what they declare (a text delta: text, numbers, the
    # SDK's own log-probability types), which pydantic writes without `serialize_as_any`'s look at each
    # value's class: 2.1 µs a text delta instead of 3.25, and each token of a streamed response is one.
    plain: frozenset[type[BaseModel]] = frozenset()

    def frame(self, event: E) -> bytes:
        """One event as the wire carries it: a typed one written by pydantic-core as it was made (the fields
        it was given, none it was not; an object in a field as its own type, as a `Response` subclass with
        whole-second times), a JSON object by orjson."""
        if isinstance(event, BaseModel):
            data = event.__pydantic_serializer__.to_json(
                event,
                by_alias=True,
                exclude_unset=True,
                serialize_as_any=type(event) not in self.plain,
                warnings=False,
            )
        else:
            data = orjson.dumps(event)
        if self.framing == "nul":
            return data + b"\0"
        if self.named:
            fields = event if isinstance(event, dict) else vars(event)
            return b"event: " + str(fields["type"]).encode() + b"\ndata: " + data + b"\n\n"
        return b"data: " + data + b"\n\n"

    def wire(self, event: E) -> Event:
        """One event as the JSON object the wire carries (for a face that sends objects, not bytes)."""
        if isinstance(event, BaseModel):
            return event.model_dump(
                mode="json", by_alias=True, exclude_unset=True, serialize_as_any=True, warnings=False
            )
        return event  # type: ignore[return-value]

    def error_frame(self, body: Event) -> bytes:
        """An error that came after the stream began, as its last frame (the openai SDK raises it)."""
        data = orjson.dumps(body)
        return data + b"\0" if self.framing == "nul" else b"data: " + data + b"\n\n"

    @property
    def end(self) -> bytes:
        """What follows the last event of a stream that completed."""
        return b"data: [DONE]\n\n" if self.done else b""


# Events relayed from elsewhere (an upstream server, a Ray replica), before the service says what they are.
RELAYED: EventKind[Event] = EventKind("relayed")


@dataclass(frozen=True)
class Events(Generic[W, E]):
    """An answer as a stream of events of one `kind`, each as the kind passes it on (`E`). Closing it stops
    the work that makes them: a generation stops at its next token and frees its slot."""

    items: AsyncGenerator[E, None]
    kind: EventKind[W, E]

    def typed(self) -> AsyncGenerator[Any, None]:
        """Each event as its `openai` object."""
        return mapped(self.items, self.kind.event)

    async def whole(self) -> W:
        """Read the stream to its end; the whole object it completes into."""
        fold = self.kind.fold()
        try:
            async for event in self.items:
                fold.add(event)
        finally:
            await self.items.aclose()
        return self.kind.whole(fold.whole())

    async def aclose(self) -> None:
        """Stop the stream and the work behind it."""
        await self.items.aclose()


async def mapped(items: AsyncGenerator[T, None], each: Callable[[T], U]) -> AsyncGenerator[U, None]:
    """`each(item)` of the items, made as each comes; closing it closes them (and stops the work behind)."""
    try:
        async for item in items:
            yield each(item)
    finally:
        await items.aclose()


@dataclass(frozen=True)
class Binary:
    """Bytes with a media type: `content` whole, or `chunks` as they are made (audio as it is synthesised, a
    file read in pieces). Closing the chunks stops the work behind them."""

    media_type: str
    content: bytes = b""
    chunks: AsyncGenerator[bytes, None] | None = None

    async def pieces(self) -> AsyncGenerator[bytes, None]:
        """The bytes as they come (whole content in one piece)."""
        if self.chunks is None:
            yield self.content
            return
        try:
            async for chunk in self.chunks:
                yield chunk
        finally:
            await self.chunks.aclose()

    async def read(self) -> bytes:
        """All the bytes."""
        return b"".join([piece async for piece in self.pieces()])

    async def aclose(self) -> None:
        """Stop making the bytes."""
        if self.chunks is not None:
            await self.chunks.aclose()


def json_bytes(data: object) -> bytes:
    """A whole answer built here as JSON (a dict may hold `openai` objects: a model list)."""
    return orjson.dumps(data, default=_dumped)


def whole_bytes(answer: object) -> bytes:
    """A whole answer as both faces write it: a list page as its body; an object as its type dumps it, but
    with its optional fields absent rather than null where `_unset_left_out` says so."""
    if isinstance(answer, ListPage):
        return json_bytes(answer.body())
    if isinstance(answer, BaseModel):
        unset = _unset_left_out(answer)
        return answer.model_dump_json(warnings=False, by_alias=True, exclude_unset=unset).encode()
    return json_bytes(answer)


def _unset_left_out(item: BaseModel) -> bool:
    """Whether an object's optional fields the service did not set are left out rather than written as null:
    a Responses object or a compaction's (the OpenResponses specification refuses null where a field is
    optional; the SDK reads the user's messages a compaction keeps as output messages, all else null), a model
    (OpenAI's has its four fields; the SDK's type has a fifth, `shutdown_date`, nothing here sets), a whole
    chat or legacy completion (their folds set what OpenAI's reference requires, `logprobs` and `refusal`
    null among it; the SDK's types add `audio`, `function_call`, `moderation`, … as null), and a
    transcription (`languages`, `logprobs` or `words` only where they were asked for and made). Objects
    whose null fields OpenAI itself writes (a batch's times, a file's `expires_at`) are written whole."""
    # Imported when an answer is first written: `import modelport` (and the command line) stays without the
    # Responses types.
    from openai.types import Completion, Model
    from openai.types.audio import Transcription, TranscriptionVerbose, Translation, TranslationVerbose
    from openai.types.chat import ChatCompletion
    from openai.types.responses import CompactedResponse
    from openai.types.responses import Response as OpenAIResponse

    return isinstance(
        item,
        OpenAIResponse
        | CompactedResponse
        | Model
        | ChatCompletion
        | Completion
        | Transcription
        | TranscriptionVerbose
        | Translation
        | TranslationVerbose,
    )


def _dumped(value: object) -> Any:
    if not isinstance(value, BaseModel):
        raise TypeError(f"{type(value).__name__} is not JSON")
    return _jsonable(value)


def listed(items: list[Event]) -> AsyncGenerator[Event, None]:
    """Events already in hand, as a stream."""

    async def events() -> AsyncGenerator[Event, None]:
        for item in items:
            yield item

    return events()


@dataclass(frozen=True)
class ListPage(Generic[T]):
    """A page in OpenAI's list shape."""

    data: list[T]
    has_more: bool

    def body(self, jsonable: bool = True) -> dict[str, Any]:
        """The page in OpenAI's list shape: its objects as JSON (the body the wire carries), or as they are
        (`jsonable=False`: what the in-process client builds the SDK's page from)."""
        data = [_jsonable(item) for item in self.data] if jsonable else list(self.data)
        ids = [_id(item) for item in data]
        return {
            "object": "list",
            "data": data,
            "first_id": ids[0] if ids else None,
            "last_id": ids[-1] if ids else None,
            "has_more": self.has_more,
        }


def _jsonable(item: object) -> dict[str, Any]:
    if isinstance(item, BaseModel):
        unset = _unset_left_out(item)
        return item.model_dump(mode="json", warnings=False, by_alias=True, exclude_unset=unset)
    assert isinstance(item, dict)
    return item


def _id(item: object) -> Any:
    return item.get("id") if isinstance(item, dict) else getattr(item, "id", None)


class ResponseDeleted(BaseModel):
    """`DELETE /v1/responses/{id}`'s answer (the `openai` package reads none: its method returns None)."""

    id: str
    object: Literal["response.deleted"] = "response.deleted"
    deleted: bool = True
