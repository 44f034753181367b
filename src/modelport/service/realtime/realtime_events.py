"""Realtime API events as the openai package types them: every server event is made as its
`RealtimeServerEvent` class (what the SDKs validate is what goes out) and stays that object until the
transport that carries it writes it (`wire`); every client event is read through its `RealtimeClientEvent`
class (unknown fields are kept: clients send extras)."""

from __future__ import annotations

from typing import Any, cast

import orjson
from openai.types.realtime import RealtimeErrorEvent, RealtimeServerEvent
from openai.types.realtime.realtime_client_event import RealtimeClientEvent
from pydantic import BaseModel, ValidationError

from modelport.errors import ModelportError
from modelport.ids import new_id
from modelport.protocol.tagged_unions import by_type
from modelport.protocol.validation import check_json, validation_param

# A server event as a transport receives it: one of `RealtimeServerEvent`'s classes, or, for a client of
# the beta protocol, the beta class it is shown as (`beta.server_event`).
Outgoing = BaseModel


SERVER_EVENTS = by_type(RealtimeServerEvent)
CLIENT_EVENTS = by_type(RealtimeClientEvent)


class ClientEventError(Exception):
    """A client event that cannot be served: sent back as an `error` event, the session goes on."""

    def __init__(
        self,
        message: str,
        *,
        code: str | None = "invalid_value",
        param: str | None = None,
        kind: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message, self.code, self.param, self.kind = message, code, param, kind


def server_event(kind: str, **fields: Any) -> RealtimeServerEvent:
    """A server event of `kind`, with a new `event_id`, made as its openai class from the fields given
    (models, or JSON-ready data the class reads): what is given is sent, a None as null (`transcript: null`
    of audio not transcribed yet, which clients require), and what is not given is left out (`wire`)."""
    data = {"type": kind, "event_id": new_id("event", "_"), **fields}
    return cast("RealtimeServerEvent", SERVER_EVENTS[kind].model_validate(data))


def wire(event: Outgoing) -> str:
    """An event as its transport writes it: JSON of the fields it was given (none of those left unset).
    (orjson writes an audio delta's base64 in half the time pydantic's `model_dump_json` takes.)"""
    return orjson.dumps(event.model_dump(mode="json", exclude_unset=True)).decode()


def error_event(error: ClientEventError | ModelportError, event_id: str | None = None) -> RealtimeErrorEvent:
    """The `error` event for a client event that failed (naming it by its `event_id` when it had one), or
    for a model that failed while answering."""
    kind = error.kind if isinstance(error, ClientEventError) else error.type
    body = {"type": kind, "code": error.code, "message": error.message}
    body.update({k: v for k, v in (("param", error.param), ("event_id", event_id)) if v is not None})
    return RealtimeErrorEvent.model_validate(
        {"type": "error", "event_id": new_id("event", "_"), "error": body}
    )


def client_event(data: Any) -> BaseModel:
    """A client event, checked by its openai class; a `ClientEventError` naming what is wrong otherwise."""
    if not isinstance(data, dict):
        raise ClientEventError("A client event is a JSON object.", code="invalid_json")
    check_json(data)  # as every request's body (a tool's schema 250 levels deep ran its walk out of stack)
    kind = data.get("type")
    cls = CLIENT_EVENTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ClientEventError(
            f"Invalid value: '{kind}'. Supported values are: {', '.join(sorted(CLIENT_EVENTS))}.",
            param="type",
        )
    try:
        return cls.model_validate(data)
    except ValidationError as error:
        raise invalid(error) from None


def invalid(error: ValidationError, prefix: str = "") -> ClientEventError:
    """The `error` of the first thing pydantic found wrong, named by its path under `prefix`."""
    first = dict(error.errors()[0])
    where = validation_param(first) or ""
    param = f"{prefix}.{where}" if prefix and where and not where.startswith("[") else prefix + where
    return ClientEventError(f"Invalid value for '{param}': {first['msg']}.", param=param or None)
