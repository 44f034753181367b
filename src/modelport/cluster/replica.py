"""A Ray Serve replica of one model: a modelport service of that model alone, loaded when the replica
starts, answering the ingress's relayed requests as a stream of items — the answer's shape (whole JSON,
events, or bytes of a media type), its parts, and a closing mark — so that the ingress can rebuild the same
answer shape and tell a finished answer from one whose replica died."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from pydantic import BaseModel

from modelport import machine
from modelport.errors import InvalidRequestError, ModelportError
from modelport.predictors.contract import Capability
from modelport.protocol.answers import Binary, Events
from modelport.service import Service
from modelport.service.operation_table import OPERATIONS
from modelport.service.operations import FilePart
from modelport.settings import Settings

# The first item says what the answer is; the last one marks its end.
JSON, EVENTS, BYTES, ERROR, END = "json", "events", "bytes", "error", "end"
Item = tuple[str, Any]


class ModelReplica:
    """Loads its model in the constructor, so Ray counts the replica as ready only once it can answer."""

    async def __init__(self, settings: dict[str, Any]) -> None:  # type: ignore[misc]  # Ray awaits it
        machine.one_blas_thread()
        self.service = Service.from_settings(Settings.model_validate(settings))
        await self.service.manager.load_all()

    async def call(
        self, path: str, body: dict[str, Any], upload: tuple[str, bytes] | None = None
    ) -> AsyncGenerator[Item, None]:
        """The answer to one request of the operation at `path` (below `/v1`), as `(kind, value)` items
        ending with `(END, None)`."""
        try:
            async for item in items(await self._answer(path, body, upload)):
                yield item
        except ModelportError as error:
            yield ERROR, (error.status, error.body(), error.retry_after)
        yield END, None

    async def _answer(self, path: str, body: dict[str, Any], upload: tuple[str, bytes] | None) -> Any:
        """Through the operation the relay sent (one its row says a relay serves), as a live request runs."""
        operation, _ = OPERATIONS.get("POST", path)
        if operation.relayed is None:
            raise InvalidRequestError(f"A replica does not serve {operation.route}.")
        return await operation.invoke(
            self.service, {}, body=body, upload=FilePart.of(*upload) if upload else None
        )

    def capabilities(self) -> dict[str, Any]:
        """What the model serves, and its voices: the ingress lists them as its own."""
        model = self.service.manager.loaded_models()[0]
        speech = model.predictors.get(Capability.SPEECH)
        return {"capabilities": sorted(model.predictors), "voices": list(speech.voices) if speech else []}


async def items(answer: object) -> AsyncGenerator[Item, None]:
    """The replica face's renderer: an answer of any of the three shapes as the items the ingress reads."""
    if isinstance(answer, Events):
        yield EVENTS, None
        try:
            async for event in answer.items:
                yield EVENTS, answer.kind.wire(event)  # as the wire carries it: the ingress relays JSON
        finally:
            await answer.aclose()
    elif isinstance(answer, Binary):
        yield BYTES, answer.media_type
        async for piece in answer.pieces():
            yield BYTES, piece
    else:
        assert isinstance(answer, BaseModel)
        yield JSON, answer.model_dump(mode="json", warnings=False, by_alias=True)
