"""What ends a session whatever carries it: for a realtime one (a WebSocket or a WebRTC call) its length
limit and its idle limit (no client event or audio for `realtime_idle_seconds`); for every open transport
(those two, and the Responses WebSocket) the key that opened it stopping working (revoked, expired, its
project archived: checked again as often as a checked key is trusted, by `key_stops`; a client secret's own
expiry ends no session it opened)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from openai.types.realtime import RealtimeErrorEvent

from modelport.errors import ModelportError
from modelport.service import Service
from modelport.service.access import Principal
from modelport.service.realtime import RealtimeSession
from modelport.service.realtime.realtime_events import ClientEventError, error_event


async def watch(
    service: Service,
    session: RealtimeSession,
    authorization: str | None,
    principal: Principal | None,
    end: Callable[[RealtimeErrorEvent | None], Awaitable[None]],
) -> None:
    """Wait until the session must end, then `end` it with the `error` event that says why."""
    limits = service.settings.limits
    key = asyncio.ensure_future(key_stops(service, authorization, principal, realtime=True))
    try:
        while True:
            idle_left = limits.realtime_idle_seconds - (time.monotonic() - session.active)
            await asyncio.wait({key}, timeout=max(0.0, min(idle_left, session.seconds_left())))
            if key.done():
                await end(error_event(key.result()))
                return
            if session.seconds_left() <= 0:
                reason = f"The session reached its length limit ({limits.realtime_minutes:g} minutes)."
                await end(error_event(ClientEventError(reason, code="session_expired")))
                return
            if time.monotonic() - session.active >= limits.realtime_idle_seconds:
                reason = f"No client event for {limits.realtime_idle_seconds:g} s: the session is closed."
                await end(error_event(ClientEventError(reason, code="idle_timeout")))
                return
    finally:
        key.cancel()


async def key_stops(
    service: Service, authorization: str | None, principal: Principal | None, *, realtime: bool = False
) -> ModelportError:
    """Wait until the key a transport was opened with stops working; the error that says why. Checked
    every `[auth] key_cache_seconds` (a transport opened without a key waits for ever)."""
    if principal is None:
        await asyncio.Event().wait()  # no key to stop working: until the transport closes
    while True:
        await asyncio.sleep(service.settings.auth.key_cache_seconds)
        try:
            await service.access.identify(authorization, realtime=realtime, opened=realtime)
        except ModelportError as error:
            return error
