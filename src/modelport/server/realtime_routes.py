"""The Realtime API's transports: `/v1/realtime` over WebSocket (authenticate the connection, open a session
in the service, pass each client message to it and each server event back), and WebRTC calls
(`/v1/realtime/calls`: an SDP offer in, the answer out, the call carried by `webrtc`). Either ends at the
session's limits (`realtime_watch`)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import Response
from openai.types.realtime import RealtimeErrorEvent
from starlette.datastructures import UploadFile
from starlette.websockets import WebSocketDisconnect, WebSocketState

from modelport import context
from modelport.errors import InvalidRequestError, ModelportError
from modelport.protocol.validation import json_value
from modelport.server.realtime_watch import watch
from modelport.service import Service
from modelport.service.access import Principal, acting_as
from modelport.service.realtime import beta
from modelport.service.realtime.realtime_events import Outgoing, error_event, wire

if TYPE_CHECKING:
    from modelport.server.webrtc import Calls

router = APIRouter(prefix="/v1")

# Browsers cannot set headers on a WebSocket: they send the key as a subprotocol, as OpenAI's docs show.
_KEY_PROTOCOL = "openai-insecure-api-key."


@router.websocket("/realtime")
async def realtime(websocket: WebSocket, model: str | None = None, intent: str | None = None) -> None:
    """A Realtime API session (`?intent=transcription`: a transcription session)."""
    service: Service = websocket.app.state.service
    offered = [p.strip() for p in websocket.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    authorization = _authorization(websocket, offered)
    try:
        principal = await service.access.identify(authorization, realtime=True)
    except ModelportError as error:
        await websocket.close(code=1008, reason=error.message[:120])  # before accepting: a 403
        return
    context.enter(acting_as(principal, context.current()))
    await websocket.accept(subprotocol="realtime" if "realtime" in offered else None)
    lock = asyncio.Lock()

    async def send(event: Outgoing) -> None:
        if websocket.application_state != WebSocketState.CONNECTED:
            return  # the client left while something was still being made for it
        async with lock:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                await websocket.send_text(wire(event))

    try:
        session = await service.realtime.open(
            model,
            intent,
            send,
            beta.wants_beta(websocket.headers, offered),
            principal.session if principal is not None else None,
        )
    except ModelportError as error:
        await send(error_event(error))
        await websocket.close(code=1011 if error.status >= 500 else 1008)
        return

    async def end(last: RealtimeErrorEvent | None) -> None:
        if last is not None:
            await send(last)
        code = last.error.code if last else None
        await websocket.close(code=1000 if code in ("session_expired", "idle_timeout") else 1008)

    async def serve() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            await session.receive(message.get("text") or message.get("bytes") or b"")
            # Messages already received are read without suspending: a client's flood would hold the event
            # loop (every other request) until its last message was handled (3.2 s for 20,000).
            await asyncio.sleep(0)

    tasks = [
        asyncio.create_task(serve()),
        asyncio.create_task(watch(service, session, authorization, principal, end)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done() and not task.cancelled() and not isinstance(task.exception(), WebSocketDisconnect):
                task.result()
    finally:
        for task in tasks:
            task.cancel()
        await session.close()


def _authorization(websocket: WebSocket, offered: list[str]) -> str | None:
    """The key as an `Authorization` header, from the header itself, a subprotocol or `?api_key=`."""
    header = websocket.headers.get("authorization")
    if header:
        return header
    key = next((p[len(_KEY_PROTOCOL) :] for p in offered if p.startswith(_KEY_PROTOCOL)), None)
    key = key or websocket.query_params.get("api_key")
    return f"Bearer {key}" if key else None


# WebRTC calls.


def calls_of(request: Request) -> Calls:
    """The app's calls in progress (made on first use)."""
    state = request.app.state
    if getattr(state, "calls", None) is None:
        # aiortc, aioice and the codecs, a tenth of the server's own import, come with the first call.
        from modelport.server.webrtc import Calls

        state.calls = Calls(state.service)
    calls: Calls = state.calls
    return calls


@router.post("/realtime/calls", status_code=201, response_class=Response)
async def create_call(request: Request, model: str | None = None) -> Response:
    """A realtime session over WebRTC: the client's SDP offer (`application/sdp`, or a multipart form with
    `sdp` and an optional `session` configuration) in, the SDP answer out, the call's URL in `Location`.
    A client secret's session configuration wins over one given here."""
    service: Service = request.app.state.service
    sdp, session = await _offer(request)
    principal: Principal | None = request.scope.get("state", {}).get("principal")
    given = principal.session if principal is not None and principal.session is not None else None
    if given is None and session is not None:
        given = service.realtime.configured(session)
    authorization = request.headers.get("authorization")
    call, answer = await calls_of(request).open(
        sdp,
        context.current().project,
        model,
        given,
        lambda s, end: watch(service, s, authorization, principal, end),
    )
    prefix = request.url.path[: request.url.path.index("/realtime")]  # /v1, or /v1/openai/v1
    location = f"{prefix}/realtime/calls/{call.id}"
    return Response(answer, 201, {"Location": location}, media_type="application/sdp")


# Before `/realtime/calls` existed, OpenAI took WebRTC offers at `/realtime` itself (`?model=`); browser
# examples written then still post there.
router.add_api_route(
    "/realtime",
    create_call,
    methods=["POST"],
    status_code=201,
    response_class=Response,
    include_in_schema=False,
)


async def _offer(request: Request) -> tuple[str, dict[str, Any] | None]:
    """The SDP offer, and the session configuration a multipart form may carry beside it."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    session: Any = None
    if kind == "multipart/form-data":
        async with request.form() as form:
            sdp: Any = form.get("sdp")
            session = form.get("session")
            if isinstance(sdp, UploadFile):
                sdp = (await sdp.read()).decode("utf-8", "replace")
            if isinstance(session, UploadFile):
                session = (await session.read()).decode("utf-8", "replace")
    else:
        sdp = (await request.body()).decode("utf-8", "replace")
    if not isinstance(sdp, str) or not sdp.strip():
        raise InvalidRequestError("Missing required parameter: 'sdp' (the WebRTC offer).", param="sdp")
    if session is not None:
        try:
            session = json_value(session)
        except ValueError:
            session = None
        if not isinstance(session, dict):
            raise InvalidRequestError(
                "'session' is a JSON object (a session configuration).", param="session"
            )
    return sdp, session
