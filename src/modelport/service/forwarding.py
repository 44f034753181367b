"""Requests for relays (models served by an upstream server or on Ray replicas): the body goes on as the
client sent it, within the model's slots; the answer comes back in the shape it came in, typed as the
endpoint's answer, with our model id. A whole answer where a stream was asked for (an upstream that ignored
`stream`) is streamed as the chunks OpenAI would have sent; a stream where a whole answer was asked for is
folded into it."""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from modelport import metrics
from modelport.errors import RelayedError, UpstreamError
from modelport.predictors.contract import Capability
from modelport.predictors.manager import LoadedModel
from modelport.predictors.relay import Relay, Reply, Upload
from modelport.protocol.answers import Binary, Event, Events, listed
from modelport.protocol.chunk_folds import chunks_of
from modelport.protocol.requests import OpenAIRequest
from modelport.protocol.sdk_private import loosely
from modelport.service import calls
from modelport.service.operations import Operation

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
log = logging.getLogger("modelport.service")
# Relays whose upstream refused the `stream_options` a stream is sent with to count its tokens (a strict
# server: pydantic models that forbid extra fields, Azure OpenAI's older API versions): not sent it again.
_REFUSING_STREAM_OPTIONS: weakref.WeakSet[Relay] = weakref.WeakSet()


async def forward(
    operation: Operation,
    model: LoadedModel,
    relay: Relay,
    request: OpenAIRequest,
    upload: Upload | None = None,
) -> Any:
    """The relay's answer to `request` of `operation`: a whole object of the type its row names, its
    events, or bytes."""
    endpoint = operation.relayed
    assert endpoint is not None, f"{operation.name} is not served by relays"
    reply = await _started(operation, model, relay, request, upload)
    answer, origin = reply.answer, reply.origin
    if isinstance(answer, Binary):
        if not endpoint.binary:
            await answer.aclose()
            raise UpstreamError(
                f"The upstream {origin} answered with {answer.media_type}, not JSON or events."
            )
        return answer  # audio, or a transcript as text, srt or vtt
    streamed = bool(getattr(request, "stream", False))
    usage_shown = not streamed or bool(getattr(request, "include_usage", False))
    if isinstance(answer, Events):
        if endpoint.events is None:
            await answer.aclose()
            raise UpstreamError(f"The upstream {origin} answered with a stream where JSON was expected.")
        events = Events(_ours(answer.items, model, origin, endpoint.chunks, usage_shown), endpoint.events)
        return await events.whole() if endpoint.chunks and not streamed else events
    if endpoint.whole is None:
        raise UpstreamError(f"The upstream {origin} answered a speech request with JSON, not audio.")
    whole = _object(answer, origin, endpoint.key, model if endpoint.named_model else None)
    if streamed and endpoint.events is not None and endpoint.chunks:
        # An upstream that ignored `stream`: its whole answer as the chunks OpenAI would have sent (counted
        # as they pass).
        pieces = chunks_of(whole) if relay.capability is Capability.CHAT else [whole]
        return Events(_ours(listed(pieces), model, origin, True, usage_shown), endpoint.events)
    _count(model.spec.id, whole.get("usage"))
    return _relayed_as(endpoint.whole(request), whole, origin)


async def _started(
    operation: Operation, model: LoadedModel, relay: Relay, request: OpenAIRequest, upload: Upload | None
) -> Reply:
    """The relay's reply, begun within one of the model's slots. A whole answer frees the slot at once; a
    stream holds it until it ends or is closed."""
    body = request.model_dump(mode="json", exclude_unset=True)
    added = False  # `stream_options`, where the client sent none
    if operation.relayed is not None and operation.relayed.chunks and body.get("stream"):
        # Every answer's tokens are counted (the metrics, the project's usage and limits), so a stream is
        # asked for its usage whether or not the client asked (`_ours` keeps it from one that did not).
        added = "stream_options" not in body
        if not (added and relay in _REFUSING_STREAM_OPTIONS):
            body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    stack = AsyncExitStack()
    await stack.enter_async_context(model.slots.hold())
    try:
        with calls.predictor_errors(relay):
            reply = await _sent(relay, operation.path, body, upload, added)
    except BaseException:
        await stack.aclose()
        raise
    answer = reply.answer
    if isinstance(answer, Events):
        return Reply(Events(_releasing(answer.items, stack.aclose), answer.kind), reply.origin)
    if isinstance(answer, Binary) and answer.chunks is not None:
        chunks = _releasing(answer.chunks, stack.aclose)
        return Reply(Binary(answer.media_type, chunks=chunks), reply.origin)
    await stack.aclose()
    return reply


async def _sent(relay: Relay, path: str, body: dict[str, Any], upload: Upload | None, added: bool) -> Reply:
    """The relay's reply to `body`; where the upstream refuses the `stream_options` this server `added`,
    the reply to the body the client sent, the field left out of the relay's streams from then on (their
    tokens then go uncounted: such an upstream cannot be asked for them)."""
    try:
        return await relay.send(path, body, upload)
    except RelayedError as error:
        if not added or error.status not in (400, 422) or "stream_options" not in json.dumps(error.body()):
            raise
    _REFUSING_STREAM_OPTIONS.add(relay)
    log.warning(
        "model %s: its upstream refuses `stream_options`; its streams are relayed without it, and their "
        "tokens are not counted",
        relay.name,
    )
    without = {key: value for key, value in body.items() if key != "stream_options"}
    return await relay.send(path, without, upload)


async def _releasing(
    items: AsyncGenerator[T, None], release: Callable[[], Awaitable[Any]]
) -> AsyncGenerator[T, None]:
    try:
        async for item in items:
            yield item
    finally:
        await items.aclose()
        await release()


async def _ours(
    events: AsyncGenerator[Event, None], model: LoadedModel, origin: str, chunks: bool, usage_shown: bool
) -> AsyncGenerator[Event, None]:
    """The upstream's events; chunks checked to have `choices`, with our model id and counted, their usage
    left out where the client did not ask for it (the chunk that holds only the usage, left out whole)."""
    try:
        async for event in events:
            if chunks:
                if not isinstance(event.get("choices"), list):
                    raise UpstreamError(f"The upstream {origin} sent a chunk without a `choices` list.")
                event["model"] = model.spec.id
                _count(model.spec.id, event.get("usage"))
                if not usage_shown and event.pop("usage", None) is not None and not event["choices"]:
                    continue
            elif _heard(event.get("usage")):  # a streamed transcript's last event
                _count(model.spec.id, event["usage"])
            yield event
    finally:
        await events.aclose()


def _count(model_id: str, usage: Any) -> None:
    """An answer's usage counted against its request: a transcript's seconds of audio heard (OpenAI's
    `{"type": "duration", "seconds": …}`), else its tokens."""
    if _heard(usage):
        metrics.count_seconds(float(usage.get("seconds") or 0))
    elif isinstance(usage, dict) and usage:
        metrics.count_tokens(model_id, usage)


def _heard(usage: Any) -> bool:
    return isinstance(usage, dict) and usage.get("type") == "duration"


def _object(body: Any, origin: str, key: str | None, model: LoadedModel | None) -> dict[str, Any]:
    """The answer's JSON object, with our model id; one without its main field (`choices`, `data`, `text`)
    is not an answer."""
    if not isinstance(body, dict) or key not in body:
        shown = json.dumps(body)[:200]
        raise UpstreamError(f"The upstream {origin} answered with JSON that has no `{key}`: {shown}")
    if model is not None:
        body["model"] = model.spec.id
    return body


def _relayed_as(cls: type[M], data: dict[str, Any], origin: str) -> M:
    """The answer as the SDK's type; an answer that is not of that shape is the upstream's fault."""
    try:
        return cls.model_validate(data)
    except ValidationError as error:
        if any(e["type"] != "missing" and e["loc"][-1:] != ("embedding",) for e in error.errors()):
            first = error.errors()[0]
            raise UpstreamError(
                f"The upstream {origin} answered with a malformed {cls.__name__}: "
                f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
            ) from None
        # A few fields missing (servers leave out `created` and the like), or base64 embeddings: as the SDK.
        return cast(M, loosely(cls, data))
