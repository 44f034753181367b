"""The ingress side of a Ray deployment: a request goes to a replica through the deployment handle (Ray
Serve routes it to the replica with the fewest ongoing requests of two it samples), and the replica's items
come back as the relay replies remote upstreams give. Ray ends the stream of a replica that died without an
error: with no closing item, that is reported as an explicit error, never as a complete answer; a request
no replica had begun is sent again."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from modelport.cluster.replica import BYTES, END, ERROR, EVENTS, JSON
from modelport.errors import ModelportError, RelayedError, UpstreamError, UpstreamUnavailableError
from modelport.predictors.relay import Reply, Upload
from modelport.protocol.answers import RELAYED, Binary, Events

log = logging.getLogger("modelport.cluster")
ATTEMPTS = 3  # replicas a request that none has begun is offered to


class ReplicaSet:
    """The replicas of one model behind its deployment handle."""

    def __init__(self, model_id: str, handle: Any) -> None:
        self.model_id = model_id
        self.handle = handle.options(stream=True)
        self.origin = f"a Ray replica of `{model_id}`"

    async def send(self, path: str, body: dict[str, Any], upload: Upload | None) -> Reply:
        """The replica's reply, its first item in hand."""
        body = {**body, "model": self.model_id}  # an alias the client used is this id on the replica
        file = (upload.name, upload.content) if upload is not None else None
        failure: BaseException | None = None
        for _ in range(ATTEMPTS):
            items = self.handle.call.remote(path, body, file)
            try:
                kind, value = await anext(items)
            except Exception as error:  # the replica died (or was gone) before it began
                failure = error
                log.warning("%s failed before answering, trying another: %s", self.origin, error)
                continue
            return await self._reply(kind, value, items)
        raise UpstreamUnavailableError(
            f"No replica of `{self.model_id}` could begin the request ({type(failure).__name__}: {failure}).",
            retry_after=5,
        )

    async def _reply(self, kind: str, value: Any, items: AsyncIterator[tuple[str, Any]]) -> Reply:
        if kind == ERROR:
            raise RelayedError(*value)
        if kind == JSON:
            return Reply(value, self.origin)
        rest = self._rest(items)
        if kind == EVENTS:
            return Reply(Events(rest, RELAYED), self.origin)
        assert kind == BYTES
        return Reply(Binary(value, chunks=rest), self.origin)

    async def _rest(self, items: AsyncIterator[tuple[str, Any]]) -> AsyncGenerator[Any, None]:
        """The answer's parts, up to the replica's closing item."""
        try:
            async for kind, value in items:
                if kind == END:
                    return
                if kind == ERROR:
                    raise RelayedError(*value)
                yield value
        except ModelportError:
            raise
        except Exception as error:
            raise UpstreamError(f"{self.origin} failed in the middle of its answer: {error}") from None
        finally:
            cancel = getattr(items, "cancel", None)
            if cancel is not None:
                cancel()  # a client that left stops the replica's work too
        raise UpstreamError(f"{self.origin} ended its answer before it was complete (the replica died).")
