"""The HTTP face's one renderer: every answer of the service, in whichever of its three shapes, as the
response that carries it."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from fastapi.responses import Response, StreamingResponse
from openai.types.responses import Response as OpenAIResponse
from pydantic import BaseModel

from modelport.protocol.answers import Binary, Events, ListPage, json_bytes
from modelport.server.streaming import EventStream, frames


def render(answer: object) -> Response:
    """A whole object as JSON; events as server-sent events (or NUL-delimited frames, as `/generate` sends
    them); bytes as a body with their media type, streamed as they are made."""
    if isinstance(answer, Events):
        if answer.kind.framing == "nul":
            return StreamingResponse(frames(answer))
        return EventStream(frames(answer))
    if isinstance(answer, Binary):
        if answer.chunks is None:
            return Response(answer.content, media_type=answer.media_type)
        return StreamingResponse(_closing(answer.chunks), media_type=answer.media_type)
    if isinstance(answer, OpenAIResponse):
        # The Responses API's optional fields are absent, never null (the OpenResponses specification refuses
        # null where a field is optional): what the service did not set is left out.
        body = answer.model_dump_json(warnings=False, by_alias=True, exclude_unset=True)
        return Response(body, media_type="application/json")
    if isinstance(answer, BaseModel):
        return Response(answer.model_dump_json(warnings=False, by_alias=True), media_type="application/json")
    if isinstance(answer, ListPage):
        answer = answer.body()
    return Response(json_bytes(answer), media_type="application/json")


async def _closing(chunks: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        await chunks.aclose()  # a client that went away stops the synthesis or the read
