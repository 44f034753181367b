"""`/v1/realtime` over WebSocket: authenticate the connection, open a session in the service, pass each
client message to it and each server event back, within the session's idle and length limits."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Any

import orjson
from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from modelport import context
from modelport.errors import ModelportError
from modelport.service import Service
from modelport.service.access import acting_as
from modelport.service.realtime import beta
from modelport.service.realtime.realtime_events import ClientEventError, error_event

router = APIRouter()

# Browsers cannot set headers on a WebSocket: they send the key as a subprotocol, as OpenAI's docs show.
_KEY_PROTOCOL = "openai-insecure-api-key."


@router.websocket("/realtime")
async def realtime(websocket: WebSocket, model: str | None = None, intent: str | None = None) -> None:
    """A Realtime API session (`?intent=transcription`: a transcription session)."""
    service: Service = websocket.app.state.service
    offered = [p.strip() for p in websocket.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    authorization = _authorization(websocket, offered)
    try:
        principal = await service.access.identify(authorization)
    except ModelportError as error:
        await websocket.close(code=1008, reason=error.message[:120])  # before accepting: a 403
        return
    context.enter(acting_as(principal, context.current()))
    await websocket.accept(subprotocol="realtime" if "realtime" in offered else None)
    lock = asyncio.Lock()

    async def send(event: dict[str, Any]) -> None:
        if websocket.application_state != WebSocketState.CONNECTED:
            return  # the client left while something was still being made for it
        async with lock:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                await websocket.send_text(orjson.dumps(event).decode())

    try:
        session = await service.realtime.open(
            model, intent, send, beta.wants_beta(websocket.headers, offered)
        )
    except ModelportError as error:
        await send(error_event(error))
        await websocket.close(code=1011 if error.status >= 500 else 1008)
        return
    limits = service.settings.limits
    # A key revoked or expired ends the sessions open with it (a session may last an hour): it is checked
    # again as often as a checked key is trusted.
    recheck = service.settings.auth.key_cache_seconds if principal is not None else math.inf
    last = checked = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            idle_left = limits.realtime_idle_seconds - (now - last)
            waited = max(0.0, min(idle_left, session.seconds_left(), checked + recheck - now))
            try:
                message = await asyncio.wait_for(websocket.receive(), waited)
            except TimeoutError:
                now = time.monotonic()
                if session.seconds_left() > 0 and now - last < limits.realtime_idle_seconds:
                    checked = now
                    try:
                        await service.access.identify(authorization)
                    except ModelportError as error:
                        await send(error_event(error))
                        await websocket.close(code=1008)
                        return
                    continue
                expired = session.seconds_left() <= 0
                reason = (
                    f"The session reached its length limit ({limits.realtime_minutes:g} minutes)."
                    if expired
                    else f"No client event for {limits.realtime_idle_seconds:g} s: the session is closed."
                )
                await send(
                    error_event(
                        ClientEventError(reason, code="session_expired" if expired else "idle_timeout")
                    )
                )
                await websocket.close(code=1000)
                return
            if message["type"] == "websocket.disconnect":
                return
            last = time.monotonic()
            await session.receive(message.get("text") or message.get("bytes") or b"")
    except WebSocketDisconnect:
        return
    finally:
        await session.close()


def _authorization(websocket: WebSocket, offered: list[str]) -> str | None:
    """The key as an `Authorization` header, from the header itself, a subprotocol or `?api_key=`."""
    header = websocket.headers.get("authorization")
    if header:
        return header
    key = next((p[len(_KEY_PROTOCOL) :] for p in offered if p.startswith(_KEY_PROTOCOL)), None)
    key = key or websocket.query_params.get("api_key")
    return f"Bearer {key}" if key else None
