"""One remote model: a request body sent to a replica and its answer read back as a relay `Reply` (JSON,
events or bytes: the answer shapes of `modelport.protocol.answers`).

Everything up to the first byte of the answer (for a stream, its first event) may be tried again on
another replica; after that, a stream that breaks off raises an error that names the upstream, so the
client is told its answer is incomplete rather than handed a silent truncation.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import orjson
from httpx_sse import EventSource, ServerSentEvent

from modelport.context import current
from modelport.engines.remote.pool import Failure, Replica, ReplicaPool, check_status, describe
from modelport.errors import ModelportError, RelayedError, UpstreamError
from modelport.predictors.relay import Reply, Upload
from modelport.protocol.answers import RELAYED, Binary, Events

_PREFIX_CHARS = 256  # of a completion prompt, for prefix routing


class RemoteModel:
    """A model id served by a pool of replicas that know it as `upstream_model`."""

    def __init__(self, pool: ReplicaPool, model_id: str, upstream_model: str) -> None:
        self.pool = pool
        self.model_id = model_id
        self.upstream_model = upstream_model

    async def send(self, path: str, body: dict[str, Any], upload: Upload | None) -> Reply:
        """Send `body` (as the client sent it, but for the model's name) to the replica's `path` (below
        `/v1`, as the operation's row names it) and return the started answer."""
        body = {**body, "model": self.upstream_model}

        async def start(replica: Replica, client: httpx.AsyncClient) -> Reply:
            request = self._request(client, replica, path, body, upload)
            response = await client.send(request, stream=True)
            try:
                await check_status(response, replica)
                return await _started(response, replica, self.pool)
            except BaseException:
                await response.aclose()
                raise

        replica, reply = await self.pool.attempt(start, self._route_key(body), self.model_id)
        if not isinstance(reply.answer, Events | Binary):  # a whole answer: the replica is free again
            self.pool.release(replica)
        return reply

    def _request(
        self,
        client: httpx.AsyncClient,
        replica: Replica,
        path: str,
        body: dict[str, Any],
        upload: Upload | None,
    ) -> httpx.Request:
        url, headers = f"{replica.url}{path}", self.pool.headers()
        if upload is None:
            return client.build_request("POST", url, json=body, headers=headers)
        fields: dict[str, Any] = {}
        for name, value in body.items():
            if isinstance(value, list):  # OpenAI's multipart arrays: `timestamp_granularities[]`
                fields[f"{name}[]"] = [str(v) for v in value]
            elif value is not None:
                fields[name] = json.dumps(value) if isinstance(value, bool) else str(value)
        files = {"file": (upload.name, upload.content, "application/octet-stream")}
        return client.build_request("POST", url, data=fields, files=files, headers=headers)

    def _route_key(self, body: dict[str, Any]) -> str | None:
        routing = self.pool.options.routing
        if routing == "session":
            user = body.get("user")
            return current().session_id or (str(user) if user else None)
        if routing == "prefix":
            messages = body.get("messages")
            if isinstance(messages, list):
                # The conversation up to its first user turn: every later turn of it starts the same way.
                head = []
                for message in messages:
                    head.append(message)
                    if isinstance(message, dict) and message.get("role") == "user":
                        break
                return json.dumps(head, sort_keys=True)
            prompt = body.get("prompt")
            if isinstance(prompt, str):
                return prompt[:_PREFIX_CHARS]
        return None


async def _started(response: httpx.Response, replica: Replica, pool: ReplicaPool) -> Reply:
    """The reply with its first piece in hand; a read that fails before it is a `Failure` (retried)."""
    media_type = response.headers.get("content-type", "application/octet-stream")
    if media_type.startswith("application/json"):
        content = await response.aread()
        await response.aclose()
        try:
            return Reply(json.loads(content), replica.label)
        except ValueError:
            raise UpstreamError(
                f"The upstream {replica.label} answered with a body that is not JSON: "
                f"{content[:200].decode('utf-8', 'replace')!r}"
            ) from None
    if media_type.startswith("text/event-stream"):
        events = EventSource(response).aiter_sse()
        first = await anext(events, None)
        if first is None:
            raise Failure("ended its stream before the first event")
        return Reply(Events(_events(first, events, response, replica, pool), RELAYED), replica.label)
    chunks = response.aiter_bytes()
    head = await anext(chunks, b"")
    return Reply(Binary(media_type, chunks=_bytes(head, chunks, response, replica, pool)), replica.label)


async def _events(
    first: ServerSentEvent,
    rest: AsyncIterator[ServerSentEvent],
    response: httpx.Response,
    replica: Replica,
    pool: ReplicaPool,
) -> AsyncGenerator[dict[str, Any], None]:
    complete = False
    try:
        event: ServerSentEvent | None = first
        while event is not None:
            if event.data == "[DONE]":
                complete = True
                break
            data = _data(event, replica)
            if "error" in data and "choices" not in data:
                raise RelayedError(_status(data), data)
            # Streams without `[DONE]` (transcription, speech events) end with a `*.done` event.
            complete = str(data.get("type", "")).endswith(".done")
            yield data
            event = await anext(rest, None)
        if not complete:
            raise UpstreamError(
                f"The upstream {replica.label} ended the stream before it was complete (no [DONE]); "
                "the answer is cut short."
            )
    except httpx.TransportError as error:
        pool.mark_down(replica, describe(error))
        raise UpstreamError(
            f"The upstream {replica.label} failed in the middle of the stream ({describe(error)}); "
            "the answer is cut short."
        ) from None
    finally:
        pool.release(replica)
        await response.aclose()


async def _bytes(
    head: bytes, rest: AsyncIterator[bytes], response: httpx.Response, replica: Replica, pool: ReplicaPool
) -> AsyncGenerator[bytes, None]:
    try:
        if head:
            yield head
        async for chunk in rest:
            yield chunk
    except httpx.TransportError as error:
        pool.mark_down(replica, describe(error))
        raise UpstreamError(
            f"The upstream {replica.label} failed in the middle of its answer ({describe(error)})."
        ) from None
    finally:
        pool.release(replica)
        await response.aclose()


def _data(event: ServerSentEvent, replica: Replica) -> dict[str, Any]:
    try:
        data = orjson.loads(event.data)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise UpstreamError(
            f"The upstream {replica.label} sent an event that is not a JSON object: {event.data[:200]!r}"
        )
    return data


def _status(data: dict[str, Any]) -> int:
    error = data.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and 400 <= code < 600 else ModelportError.status
