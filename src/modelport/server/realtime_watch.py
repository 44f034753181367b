"""What ends a realtime session whatever carries it (a WebSocket or a WebRTC call): its length limit, its
idle limit (no client event or audio for `realtime_idle_seconds`), and the key that opened it stopping
working (revoked, expired, its project archived: checked again as often as a checked key is trusted; a
client secret's own expiry ends no session it opened)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

from modelport.errors import ModelportError
from modelport.service import Service
from modelport.service.access import Principal
from modelport.service.realtime import RealtimeSession
from modelport.service.realtime.realtime_events import ClientEventError, Event, error_event


async def watch(
    service: Service,
    session: RealtimeSession,
    authorization: str | None,
    principal: Principal | None,
    end: Callable[[Event | None], Awaitable[None]],
) -> None:
    """Wait until the session must end, then `end` it with the `error` event that says why."""
    limits = service.settings.limits
    recheck = service.settings.auth.key_cache_seconds if principal is not None else math.inf
    checked = time.monotonic()
    while True:
        now = time.monotonic()
        idle_left = limits.realtime_idle_seconds - (now - session.active)
        await asyncio.sleep(max(0.0, min(idle_left, session.seconds_left(), checked + recheck - now)))
        now = time.monotonic()
        if session.seconds_left() <= 0:
            reason = f"The session reached its length limit ({limits.realtime_minutes:g} minutes)."
            await end(error_event(ClientEventError(reason, code="session_expired")))
            return
        if now - session.active >= limits.realtime_idle_seconds:
            reason = f"No client event for {limits.realtime_idle_seconds:g} s: the session is closed."
            await end(error_event(ClientEventError(reason, code="idle_timeout")))
            return
        if now - checked >= recheck:
            checked = now
            try:
                await service.access.identify(authorization, realtime=True, opened=True)
            except ModelportError as error:
                await end(error_event(error))
                return
