"""The in-process face's one path into the service: a request the `openai` SDK built (its method, path,
query, body and files) found in the operation table, admitted as the HTTP face admits it (the caller's key,
when one was given; the operation's body bound), and called. What comes back is the service's answer,
unrendered: the clients hand back its objects as they are, and render to HTTP bytes only what the SDK must
read as a response (`.with_raw_response`, binary and text answers)."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import httpx2
import openai
import orjson
from pydantic import BaseModel

from modelport import context
from modelport.client.arguments import read_file
from modelport.client.local_files import inlined
from modelport.client.sdk_errors import sdk_errors
from modelport.context import RequestContext
from modelport.errors import PermissionDeniedError
from modelport.protocol.answers import Binary, Events, ListPage, whole_bytes
from modelport.protocol.sdk_private import RAW_RESPONSE_HEADER, FinalRequestOptions, Querystring, is_given
from modelport.service import Service
from modelport.service.access import acting_as
from modelport.service.operation_table import OPERATIONS
from modelport.service.operations import FilePart, Operation

BASE_URL = "http://modelport.in-process/v1"
# What the HTTP face says a stream of events is (Starlette adds the charset to a text type).
EVENT_STREAM = "text/event-stream; charset=utf-8"
NO_KEY = "in-process"  # what the SDK holds as its key when none is given (it asks for one)
# The TLS context of the SDK's HTTP client, which nothing here sends through: it trusts no certificate,
# where the SDK's default loaded the machine's CA certificates for every client made (10-35 ms of CPU).
UNSENT_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
_QS = Querystring(array_format="brackets")  # as the SDK writes a query string


def sdk_arguments(
    api_key: str | None, options: dict[str, Any], http_client: Callable[..., Any]
) -> dict[str, Any]:
    """What an in-process client gives the SDK's client it is: the SDK's other `options` as given, but a
    `base_url` (ignored), no retries (nothing crosses a network here to retry) and, unless one is given, an
    `http_client` of `http_client`'s kind that trusts nothing (`UNSENT_TLS`)."""
    options = {name: value for name, value in options.items() if name != "base_url"}
    options.setdefault("max_retries", 0)
    if options.get("http_client") is None:
        options["http_client"] = http_client(verify=UNSENT_TLS)
    return {**options, "api_key": api_key or NO_KEY, "base_url": BASE_URL}


@dataclass(frozen=True)
class Shaped:
    """An answer as the SDK's `request()` hands it back, but for what takes the client's own I/O: `events`
    (for its stream class) or an HTTP `response` (for its `_process_response`); else `value`, the parsed
    object."""

    path: str
    events: Events[Any] | None = None
    response: httpx2.Response | None = None
    value: Any = None


class Dispatch:
    """Requests of one client's SDK into one service."""

    def __init__(self, service: Service, api_key: str | None) -> None:
        self.service = service
        self.api_key = api_key  # identified like a bearer key when given; else the default project's

    @staticmethod
    def raw(options: FinalRequestOptions) -> bool:
        """Whether the SDK asked for the response itself (`.with_raw_response`, `.with_streaming_response`)
        rather than its parsed objects."""
        return bool(_headers(options).get(RAW_RESPONSE_HEADER))

    def path(self, options: FinalRequestOptions) -> str:
        """The request's path below `/v1`."""
        url = options.url
        return url.removeprefix(BASE_URL).split("?", 1)[0] if url.startswith("http") else url.split("?", 1)[0]

    async def answer(self, options: FinalRequestOptions) -> tuple[object, dict[str, str]]:
        """The service's answer to the request `options` describes, and the headers HTTP would carry with
        it (`x-request-id`: the caller's if it gave a sane one, as over HTTP; the rate limits); errors as
        the SDK's exceptions."""
        path = self.path(options)
        with sdk_errors(path):
            operation, params = OPERATIONS.get(options.method, path)
            body = _body(options)
            upload = _upload(options, operation.upload_field)
            self._check_size(operation, body, upload)
            if body is not None and operation.local_files is not None:
                # Content parts naming local files (`file://`), which only the in-process client reads.
                limit = self.service.settings.limits.fetch_bytes
                body = await inlined(body, operation.local_files, limit)
            values = dict(options.params) if isinstance(options.params, dict) else {}
            query = _QS.stringify_items(values) if values else []
            outer = context.current()
            request_id = context.request_id(_headers(options).get("x-request-id", ""))
            called = replace(await self._caller(operation, outer), request_id=request_id, headers={})
            context.enter(called)
            try:
                answer = await operation.invoke(
                    self.service,
                    params,
                    body=body,
                    values=values,
                    query=query,
                    upload=upload,
                    whole=not _streamed_raw(options),
                )
                return answer, {**called.headers, "x-request-id": request_id}
            finally:
                context.enter(outer)

    def shaped(
        self,
        client: Any,
        answer: object,
        headers: dict[str, str],
        options: FinalRequestOptions,
        cast_to: Any,
        stream: bool,
        pull: Any = None,
    ) -> Shaped:
        """How the sync and async clients' `request()` hand `answer` back: its events as the SDK's stream
        (where the SDK asked for one: `stream`), its object parsed as the SDK would, or what the SDK must
        read as a response (raw responses, bytes, and events the SDK reads as bytes, as speech's `sse`)
        rendered to HTTP. `pull` runs one step of an async iterator, for a blocking client."""
        path, raw = self.path(options), self.raw(options)
        if not raw and stream and isinstance(answer, Events):
            return Shaped(path, events=answer)
        if not raw and not isinstance(answer, Binary | Events):
            return Shaped(path, value=parsed(client, sdk_data(answer), cast_to, options))
        return Shaped(path, response=http_response(answer, options, headers, pull=pull))

    async def _caller(self, operation: Operation, outer: RequestContext) -> RequestContext:
        """Who calls: the key this client was given, checked as a bearer key is over HTTP (when the service
        needs keys), else the default project."""
        if self.api_key is None:
            if operation.admin:
                raise PermissionDeniedError("The organization API needs an admin key: give it as `api_key`.")
            return outer
        principal = await self.service.access.identify(f"Bearer {self.api_key}", admin=operation.admin)
        return acting_as(principal, outer)

    def _check_size(self, operation: Operation, body: dict[str, Any] | None, upload: FilePart | None) -> None:
        """The operation's body bound, as the HTTP face holds a body to it."""
        settings = self.service.settings
        size = 0  # a body that is not JSON (bytes of the SDK's own) is not measured here
        if upload is not None:
            upload.source.seek(0, 2)
            size = upload.source.tell()
            upload.source.seek(0)
        elif body is not None:
            with contextlib.suppress(TypeError):
                size = len(orjson.dumps(body))
        else:
            return
        if size > operation.body_limit(settings):
            raise operation.too_large(settings)


def _body(options: FinalRequestOptions) -> dict[str, Any] | None:
    body = options.json_data
    if options.extra_json:
        body = {**(body if isinstance(body, dict) else {}), **options.extra_json}
    return body if isinstance(body, dict) else None


def _upload(options: FinalRequestOptions, field: str) -> FilePart | None:
    files = options.files
    if not files:
        return None
    items = list(files.items()) if isinstance(files, dict) else list(files)
    for key, file in items:
        if key == field:
            upload = read_file(file)
            return FilePart.of(upload.name, upload.content)
    return None


def sdk_data(answer: object) -> Any:
    """A whole answer as the data the SDK builds its type from: an object as it is, a page with its
    objects."""
    if isinstance(answer, ListPage):
        return answer.body(jsonable=False)
    return answer


def http_response(
    answer: object, options: FinalRequestOptions, headers: dict[str, str], pull: Any = None
) -> httpx2.Response:
    """The answer as the HTTP face would send it, with `headers`, for what the SDK reads as a response:
    JSON, server-sent events, or bytes with their media type. `pull` runs one step of an async iterator,
    for a blocking client (None: the bytes stay an async stream)."""
    request = httpx2.Request(options.method, BASE_URL + options.url, headers=_headers(options))
    if isinstance(answer, Events):
        sent = {**headers, "content-type": EVENT_STREAM}
        return httpx2.Response(200, headers=sent, stream=_stream(_frames(answer), pull), request=request)
    if isinstance(answer, Binary):
        sent = {**headers, "content-type": answer.media_type}
        if answer.chunks is None:
            return httpx2.Response(200, headers=sent, content=answer.content, request=request)
        return httpx2.Response(200, headers=sent, stream=_stream(answer.pieces(), pull), request=request)
    sent = {**headers, "content-type": "application/json"}
    return httpx2.Response(200, headers=sent, content=whole_bytes(answer), request=request)


def _streamed_raw(options: FinalRequestOptions) -> bool:
    """Whether the SDK reads the answer as a stream of bytes (`.with_streaming_response`), not whole."""
    return _headers(options).get(RAW_RESPONSE_HEADER) == "stream"


def _headers(options: FinalRequestOptions) -> dict[str, str]:
    headers = options.headers if isinstance(options.headers, dict) else {}
    return {k: v for k, v in headers.items() if isinstance(v, str)}


async def _frames(events: Events[Any]) -> AsyncGenerator[bytes, None]:
    try:
        async for event in events.items:
            yield events.kind.frame(event)
    finally:
        await events.aclose()
    yield events.kind.end


def _stream(pieces: AsyncGenerator[bytes, None], pull: Any) -> httpx2.AsyncByteStream | httpx2.SyncByteStream:
    return _AsyncBytes(pieces) if pull is None else _SyncBytes(pieces, pull)


class _AsyncBytes(httpx2.AsyncByteStream):
    def __init__(self, pieces: AsyncGenerator[bytes, None]) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self.pieces:
            yield piece

    async def aclose(self) -> None:
        await self.pieces.aclose()  # a reader that stops early stops the work behind the bytes


class _SyncBytes(httpx2.SyncByteStream):
    def __init__(self, pieces: AsyncGenerator[bytes, None], pull: Any) -> None:
        self.pieces = pieces
        self.pull = pull

    def __iter__(self) -> Iterator[bytes]:
        while True:
            try:
                yield self.pull(self.pieces.__anext__())
            except StopAsyncIteration:
                return

    def close(self) -> None:
        self.pull(self.pieces.aclose())


def parsed(client: Any, data: Any, cast_to: Any, options: FinalRequestOptions) -> Any:
    """A whole answer as `cast_to`, as the SDK makes it from a body (the service's own object when it
    already is one), then through the request's `post_parser` (pages, `.parse()`)."""
    if isinstance(cast_to, type) and isinstance(data, cast_to):
        result = data
    else:
        if isinstance(data, BaseModel) and not isinstance(data, openai.BaseModel):
            # A type of ours (a page, say) that the SDK reads as one of its own: from its JSON, as over HTTP.
            data = data.model_dump(mode="json", warnings=False, by_alias=True)
        response = httpx2.Response(200, request=httpx2.Request(options.method, BASE_URL + options.url))
        result = client._process_response_data(data=data, cast_to=cast_to, response=response)
    if is_given(options.post_parser):
        result = options.post_parser(result)
    return result
