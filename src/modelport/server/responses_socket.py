"""The Responses API over a WebSocket (`/v1/responses`), as `client.beta.responses.connect()` speaks it: the
client sends `response.create` events (the body of `POST /v1/responses`, less `stream`), the server sends
the same events the SSE stream carries, and an `error` event for a turn that cannot run (the connection
goes on). An agent loop saves a round trip and a TLS handshake per tool call. Each turn is the operation
table's `responses.create`, so admission, limits and storage are the HTTP route's. Turns with the same
`stream_id` (a lane) run one after another, in order; lanes run side by side. A connection lasts `[limits]
responses_socket_minutes` at most (60, as OpenAI's): then an `error` event with the code
`websocket_connection_limit_reached`, and the connection closes (its clients open another)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from modelport import context
from modelport.errors import InvalidRequestError, ModelportError
from modelport.protocol.answers import Events
from modelport.server.realtime_watch import key_stops
from modelport.service import Service
from modelport.service.access import acting_as
from modelport.service.operation_table import OPERATIONS

router = APIRouter(prefix="/v1")
_CREATE = OPERATIONS.by_name("responses.create")
_DEFAULT_LANE = ""
# What one connection may hold, so that nothing a client sends grows without a bound: lanes (each a task),
# and turns waiting in one lane. Past either, the event is refused with an `error` event.
MOST_LANES = 32
MOST_WAITING = 64


@router.websocket("/responses")
async def responses(websocket: WebSocket) -> None:
    """Responses over one connection."""
    service: Service = websocket.app.state.service
    authorization = websocket.headers.get("authorization")
    try:
        principal = await service.access.identify(authorization)
    except ModelportError as error:
        await websocket.close(code=1008, reason=error.message[:120])  # before accepting: a 403
        return
    context.enter(acting_as(principal, context.current()))
    await websocket.accept()
    lock = asyncio.Lock()

    async def send(event: dict[str, Any]) -> None:
        if websocket.application_state != WebSocketState.CONNECTED:
            return
        async with lock:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                await websocket.send_text(orjson.dumps(event).decode())

    lanes: dict[str, asyncio.Queue[dict[str, Any]]] = {}
    workers: list[asyncio.Task[None]] = []

    async def end(error: ModelportError, code: int, reason: str) -> None:
        """No turn runs on, and the connection closes saying why."""
        for worker in workers:
            worker.cancel()
        await send(_error(error, None))
        with contextlib.suppress(RuntimeError):
            await websocket.close(code=code, reason=reason)

    async def revoked() -> None:
        """The key stopped working."""
        error = await key_stops(service, authorization, principal)
        await end(error, 1008, error.message[:120])

    async def aged() -> None:
        """The connection reached its length limit."""
        minutes = service.settings.limits.responses_socket_minutes
        await asyncio.sleep(minutes * 60)
        reached = InvalidRequestError(
            f"The WebSocket connection reached its limit of {minutes:g} minutes: open a new one.",
            code="websocket_connection_limit_reached",
        )
        await end(reached, 1000, "websocket_connection_limit_reached")

    watcher, limit = asyncio.create_task(revoked()), asyncio.create_task(aged())
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            raw = message.get("text") or message.get("bytes") or b""
            try:
                event = _event(raw, service.settings.limits.body_bytes)
            except ModelportError as error:
                await send(_error(error, None))
                continue
            lane = event.get("stream_id") or _DEFAULT_LANE
            if lane not in lanes and len(lanes) >= MOST_LANES:
                refused = f"A connection holds {MOST_LANES} lanes (stream_id) at most."
                await send(_error(InvalidRequestError(refused, param="stream_id"), lane))
                continue
            if lane in lanes and lanes[lane].qsize() >= MOST_WAITING:
                refused = f"A lane holds {MOST_WAITING} waiting turns at most: wait for one to end."
                await send(_error(InvalidRequestError(refused, param="stream_id"), lane))
                continue
            if lane not in lanes:
                lanes[lane] = asyncio.Queue()
                workers.append(asyncio.create_task(_run_lane(service, lanes[lane], send)))
            lanes[lane].put_nowait(event)
            await asyncio.sleep(0)  # as the realtime socket: a flood of messages read at once yields
    except WebSocketDisconnect:
        return
    finally:
        watcher.cancel()
        limit.cancel()
        for worker in workers:
            # A turn under way stops (its generation frees its slot), once: cancelled again (after a revoked
            # key), asyncio's cancel would pass anyio's shield around the step storing what it made.
            if not worker.cancelling():
                worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


def _event(raw: str | bytes, limit: int) -> dict[str, Any]:
    """A client event, checked: a `response.create` (the only one served), within the body bound."""
    if len(raw) > limit:
        raise InvalidRequestError(f"A message may be {limit} bytes at most; this one is {len(raw)}.")
    try:
        event = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise InvalidRequestError(f"The message is not JSON: {error}.") from None
    if not isinstance(event, dict) or event.get("type") != "response.create":
        kind = event.get("type") if isinstance(event, dict) else None
        raise InvalidRequestError(
            f"Invalid event type {kind!r}: this server takes 'response.create' over this connection.",
            param="type",
        )
    if not isinstance(event.get("stream_id", ""), str):  # it is echoed on the turn's every event
        raise InvalidRequestError("stream_id must be a string.", param="stream_id")
    return event


async def _run_lane(service: Service, turns: asyncio.Queue[dict[str, Any]], send: Any) -> None:
    """One lane's turns, in order."""
    while True:
        event = await turns.get()
        lane = event.get("stream_id")
        try:
            await _turn(service, event, lane, send)
        except ModelportError as error:
            await send(_error(error, lane))


async def _turn(service: Service, event: dict[str, Any], lane: str | None, send: Any) -> None:
    body = {k: v for k, v in event.items() if k not in ("type", "stream_id", "stream")}
    if body.get("background"):
        raise InvalidRequestError(
            "background is not supported over a WebSocket: use POST /v1/responses.", param="background"
        )
    if body.get("generate") is False:
        raise InvalidRequestError(
            "generate: false is not supported by this server: send the input with the next turn.",
            param="generate",
        )
    body.pop("generate", None)
    answer = await _CREATE.invoke(service, {}, body={**body, "stream": True})
    assert isinstance(answer, Events)
    try:
        async for item in answer.items:
            sent = answer.kind.wire(item)
            await send({**sent, "stream_id": lane} if lane is not None else sent)
    finally:
        await answer.aclose()


def _error(error: ModelportError, lane: str | None) -> dict[str, Any]:
    """The `error` event of a turn that could not run (or failed as it ran)."""
    event: dict[str, Any] = {"type": "error", "status": error.status, **error.body()}
    if lane is not None:
        event["stream_id"] = lane
    return event
