"""The HTTP face's guards and records, as plain ASGI middleware (which, unlike Starlette's
`BaseHTTPMiddleware`, leaves streaming and disconnects alone): who is calling, a body-size bound, and per
request an id, an access-log line and metrics."""

from __future__ import annotations

import asyncio
import json
import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelport import context
from modelport.context import RequestContext
from modelport.errors import ModelportError, PayloadTooLargeError, RequestTimeoutError
from modelport.metrics import LATENCY, REQUESTS
from modelport.server.error_shapes import error_content
from modelport.service.access import Access, acting_as
from modelport.service.operation_table import OPERATIONS
from modelport.service.operations import Operation
from modelport.settings import Settings

access_log = logging.getLogger("modelport.access")
_OPERATION = "operation"  # the scope state's key for the request's row
# The WebRTC offers (`/realtime` is where OpenAI took them before `/realtime/calls`): a transport, as the
# realtime WebSocket is, so not rows; a client secret may make them.
WEBRTC_OFFERS = ("/realtime/calls", "/realtime")
_MIRROR = "/v1/openai/v1"


async def reply(send: Send, error: ModelportError, path: str) -> None:
    raw = error_content(path, error)
    fields = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    fields += [(k.lower().encode(), v.encode()) for k, v in error.headers().items()]
    await send({"type": "http.response.start", "status": error.status, "headers": fields})
    await send({"type": "http.response.body", "body": raw})


class Authenticate:
    """Every `/v1` route, `/generate` and `/api` need `Authorization: Bearer <key>` (or `x-api-key`) once the
    server has keys (`--api-key`, or keys in the store); the organization API always needs an admin key, and
    so does `/metrics` (which shows every project's usage) once projects have keys in the store, unless the
    operator opens it (`--open-metrics`); `--protect-metrics` asks a key for it always. The caller's project
    goes into the request context (and the caller into the scope's state), and the service's rate-limit
    headers onto the answer."""

    def __init__(self, app: ASGIApp, access: Access, protect_metrics: bool, open_metrics: bool) -> None:
        self.app = app
        self.access = access
        self.protect_metrics = protect_metrics
        self.open_metrics = open_metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"] if scope["type"] == "http" else ""
        metrics = path == "/metrics"
        if metrics and not self.protect_metrics:
            metrics_closed = not self.open_metrics and await self.access.keys.stored()
        else:
            metrics_closed = metrics
        if not (path.startswith(("/v1", "/generate", "/api/")) or metrics_closed):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        # Anthropic's SDKs and Claude Code send the key as `x-api-key`.
        given = headers.get(b"authorization") or (
            b"Bearer " + headers[b"x-api-key"] if b"x-api-key" in headers else None
        )
        operation = operation_of(scope)
        admin = (operation is not None and operation.admin) or (metrics and not self.protect_metrics)
        # A realtime client secret opens WebRTC calls and ends them (WebSocket sessions do not pass here).
        if operation is not None:
            realtime = operation.session
        else:
            realtime = scope["method"] == "POST" and _below_v1(path) in WEBRTC_OFFERS
        try:
            principal = await self.access.identify(
                given.decode("latin-1") if given else None, admin=admin, realtime=realtime
            )
        except ModelportError as error:
            await reply(send, error, path)
            return
        request = acting_as(principal, context.current())
        context.enter(request)
        scope.setdefault("state", {})["principal"] = principal  # a call opens the session a secret carries

        async def with_limits(message: Message) -> None:
            if message["type"] == "http.response.start" and request.headers:
                have = {name.lower() for name, _ in message.get("headers", [])}
                extra = [
                    (k.encode(), v.encode()) for k, v in request.headers.items() if k.encode() not in have
                ]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_limits)


class BodyLimit:
    """Refuse request bodies over their operation's bound (its row in the operation table says which: the
    JSON body bound, or an upload's) with a 413, by `Content-Length` before anything is read, or as they
    stream in. A path no operation serves is held to the JSON body bound. A body that pauses longer than
    `[limits] read_seconds` is a 408 (a client trickling bodies would hold a connection each for ever)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        operation = operation_of(scope)
        if operation is not None:
            limit, too_large = operation.body_limit(self.settings), operation.too_large(self.settings)
        else:
            limit = self.settings.limits.body_bytes
            too_large = PayloadTooLargeError(f"The request body is over the limit of {limit} bytes.")
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await reply(send, too_large, scope["path"])
            return
        seen = 0
        started = rejected = read = False
        pause = self.settings.limits.read_seconds

        async def counted() -> Message:
            nonlocal seen, rejected, read
            if read or rejected:
                message = await receive()  # once the body is read, only the client's leaving comes
            else:
                try:
                    async with asyncio.timeout(pause):
                        message = await receive()
                except TimeoutError:
                    rejected = True
                    if not started:
                        late = RequestTimeoutError(f"The request body paused for over {pause:g} s.")
                        await reply(send, late, scope["path"])
                    return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body"):
                read = True
            if message["type"] == "http.request" and not rejected:
                seen += len(message.get("body", b""))
                if seen > limit:
                    rejected = True
                    if not started:
                        await reply(send, too_large, scope["path"])
            # The app sees a client that left, and stops reading; the 413 is already on its way.
            return {"type": "http.disconnect"} if rejected else message

        async def tracked(message: Message) -> None:
            nonlocal started
            if rejected:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except Exception:
            if not rejected:
                raise


class Disconnects:
    """A client that leaves before its answer is complete cancels the work done for it at once, whether it
    waits for a whole answer or reads a stream: the generation stops, its slot and any upstream request are
    freed. (Starlette only notices a departure while it streams.)"""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body_read, gone = asyncio.Event(), asyncio.Event()
        answered = False

        async def app_receive() -> Message:
            if body_read.is_set():  # the watcher below reads from the client now
                await gone.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                body_read.set()
            return message

        async def app_send(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered = True
            await send(message)

        work = asyncio.ensure_future(self.app(scope, app_receive, app_send))

        async def watch() -> None:
            await body_read.wait()
            while not gone.is_set() and (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            if not answered and not work.done():
                scope.setdefault("state", {})["client_gone"] = True
                work.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            await work
        except asyncio.CancelledError:
            if not scope.get("state", {}).get("client_gone"):
                raise
        finally:
            watcher.cancel()


class RequestRecords:
    """A request id (the client's `x-request-id` if sane, else a new one) echoed in the response, one
    access-log line, and the request counter and latency histogram."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        operation = operation_of(scope)  # matched once, here, for every later step
        given = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        request_id = context.request_id(given)
        scope.setdefault("state", {})["request_id"] = request_id
        session = dict(scope["headers"]).get(b"x-session-id", b"").decode("latin-1")
        context.enter(RequestContext(request_id, session if context.SANE_ID.fullmatch(session) else None))
        start = time.perf_counter()
        status = 500

        async def tagged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, tagged)
        finally:
            seconds = time.perf_counter() - start
            if scope["state"].get("client_gone"):
                status = 499  # the client closed the connection before its answer was complete
            route = _route(scope, operation)
            REQUESTS.labels(route, scope["method"], str(status)).inc()
            LATENCY.labels(route).observe(seconds)
            access_log.info(
                "%s",
                json.dumps(
                    {
                        "request_id": request_id,
                        "method": scope["method"],
                        "path": scope["path"],
                        "status": status,
                        "ms": round(seconds * 1000, 1),
                        "client": (scope.get("client") or ("", 0))[0],
                    }
                ),
            )


class OpenAIMirror:
    """The `/v1` routes at `/v1/openai/v1` too (the base URL Llama Stack's clients use): such a request is
    routed below `/v1/openai`, as by an app mounted there, its path as sent (every step, its records and its
    errors see that)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            root, path = scope.get("root_path", ""), scope["path"]
            below = path[len(root) :] if path.startswith(root) else path
            if below.startswith(_MIRROR + "/"):
                scope = {**scope, "root_path": root + _MIRROR.removesuffix("/v1")}
        await self.app(scope, receive, send)


def _below_v1(path: str) -> str:
    """A path below `/v1` (or OpenAI's `/v1/openai/v1`) without that prefix; others as they are."""
    for prefix in (_MIRROR, "/v1"):
        if path.startswith(prefix + "/"):
            return path[len(prefix) :]
    return path


def operation_of(scope: Scope) -> Operation | None:
    """The row of the operation table an HTTP request names: matched once, by the outermost middleware
    (`RequestRecords`), and kept in the scope for every later step."""
    state = scope.setdefault("state", {})
    if _OPERATION not in state:
        found = OPERATIONS.find(scope["method"], _below_v1(scope["path"]))
        state[_OPERATION] = found[0] if found is not None else None
    operation: Operation | None = state[_OPERATION]
    return operation


def _route(scope: Scope, operation: Operation | None) -> str:
    """The route a request belongs to, for metric labels: its operation's route template, else the template
    of the route that served it (the other faces', the transports'), never the raw path, whose values are
    unbounded."""
    if operation is not None:
        return operation.route
    # The route that served it is known below its router's mount (`/v1`, `/api`): a route without parameters
    # whose template ends the path is that path itself, one of a few.
    template = getattr(scope.get("route"), "path", None)
    path = str(scope["path"]).rstrip("/")
    if isinstance(template, str) and "{" not in template and path.endswith(template.rstrip("/")):
        return path or "/"
    return "other"
