"""The WebRTC calls in progress, by id. The HTTP face opens them (a call is a peer connection, its
transport, as a WebSocket session is the socket's); ending one is an operation like any other
(`realtime.calls.hangup`), so its row serves every face and admission applies to it once."""

from __future__ import annotations

import asyncio
from typing import NoReturn, Protocol

from openai.types.realtime import RealtimeErrorEvent

from modelport import context
from modelport.errors import InvalidRequestError, NotFoundError


class HeldCall(Protocol):
    """What the book needs of a call: whose it is, and how it ends."""

    @property
    def id(self) -> str: ...

    @property
    def project(self) -> str: ...

    async def end(self, last: RealtimeErrorEvent | None = None) -> None:
        """Hang up (after `last`, an error event saying why, if given)."""


class HeldCalls:
    """The calls in progress, each of one project."""

    def __init__(self) -> None:
        self._calls: dict[str, HeldCall] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def ids(self) -> list[str]:
        """The ids of every call in progress, of any project."""
        return list(self._calls)

    def add(self, call: HeldCall) -> None:
        """A call now in progress."""
        self._calls[call.id] = call

    def forget(self, call_id: str) -> None:
        """A call that ended."""
        self._calls.pop(call_id, None)

    def find(self, call_id: str) -> HeldCall:
        """A call of the caller's project in progress; a 404 for any other."""
        call = self._calls.get(call_id)
        if call is None or call.project != context.current().project:
            raise NotFoundError(f"No call in progress with id '{call_id}'.", param="call_id")
        return call

    async def hang_up(self, call_id: str) -> None:
        """End a call of the caller's project."""
        await self.find(call_id).end()

    def sip_only(self, call_id: str, action: str) -> NoReturn:
        """`accept`, `reject` and `refer` are for incoming SIP calls, which this server does not take."""
        self.find(call_id)
        raise InvalidRequestError(
            f"'{action}' is for incoming SIP calls; this server takes WebRTC calls only (end one with "
            f"POST /v1/realtime/calls/{call_id}/hangup).",
            code="unsupported_call_action",
        )

    async def close(self) -> None:
        """End every call (the server stops)."""
        await asyncio.gather(*(call.end() for call in list(self._calls.values())), return_exceptions=True)
