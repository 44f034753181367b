"""The Responses API's stream as an event kind (`RESPONSE_EVENTS`): the response its events make, events
read back from the store as the SDK's types, a stored response's events replayed from its items, and a
background job's events in the form the store keeps them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any, cast

from openai.types.responses import (
    Response,
    ResponseCustomToolCallInputDeltaEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
)
from pydantic import ValidationError

from modelport.protocol.answers import EventKind, mapped
from modelport.protocol.event_kinds import one_of
from modelport.protocol.response_object import ResponseObject
from modelport.protocol.tagged_unions import by_type
from modelport.service.responses.response_events import ResponseEvents


class _Snapshot:
    """The response a stream of Responses events makes: the one its last lifecycle event carries."""

    def __init__(self) -> None:
        self.last: Response | None = None

    def add(self, event: ResponseStreamEvent) -> None:
        """Keep the response a lifecycle event carries."""
        response = getattr(event, "response", None)
        if isinstance(response, Response):
            self.last = response

    def whole(self) -> Response | None:
        """The last response carried."""
        return self.last


def _event(data: dict[str, Any]) -> ResponseStreamEvent:
    """An event read back as the wire carried it (a background job's, from the store), typed; a lifecycle
    event's response as its own type (its times whole seconds)."""
    response = data.get("response")
    if isinstance(response, dict):
        with contextlib.suppress(ValidationError):
            data = {**data, "response": ResponseObject.model_validate(response)}
    return cast(ResponseStreamEvent, one_of(_EVENT_TYPES, ResponseStreamEvent, data))


_EVENT_TYPES = by_type(ResponseStreamEvent)


# Built as the SDK's types and passed on as they are, to the in-process client too; written to JSON only
# at a face that sends bytes (and for the store, `wire`).
RESPONSE_EVENTS: EventKind[Response, ResponseStreamEvent] = EventKind(
    "response",
    fold=_Snapshot,
    parse=_event,
    whole=lambda response: response,
    named=True,
    # The deltas, a token each: text and numbers, and the SDK's own log-probability types.
    plain=frozenset(
        {
            ResponseTextDeltaEvent,
            ResponseReasoningTextDeltaEvent,
            ResponseReasoningSummaryTextDeltaEvent,
            ResponseFunctionCallArgumentsDeltaEvent,
            ResponseCustomToolCallInputDeltaEvent,
        }
    ),
)


def replayed(stored: dict[str, Any], after: int | None) -> AsyncGenerator[ResponseStreamEvent, None]:
    """The events of a stored (not background) response, from its items, after sequence number `after`."""

    async def events() -> AsyncGenerator[ResponseStreamEvent, None]:
        response = ResponseObject.model_validate(stored)
        builder = ResponseEvents(
            response.model_copy(update={"status": "in_progress", "output": [], "usage": None})
        )
        produced = builder.start()
        for item in response.output:
            produced += builder.replay(item)
        builder.response = response
        produced.append(
            builder.ending(response.status if response.status in ("incomplete", "failed") else "completed")
        )
        for event in produced:
            if after is None or event.sequence_number > after:
                yield event

    return events()


def wire(events: AsyncGenerator[ResponseStreamEvent, None]) -> AsyncGenerator[dict[str, Any], None]:
    """A background job's events as the store keeps them: JSON objects, each made as it goes out, before
    the work that follows it changes what it tells (`RESPONSE_EVENTS.wire`)."""
    return mapped(events, RESPONSE_EVENTS.wire)
