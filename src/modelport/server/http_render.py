"""The HTTP face's one renderer: every answer of the service, in whichever of its three shapes, as the
response that carries it."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from fastapi.responses import Response, StreamingResponse

from modelport.protocol.answers import Binary, Events, whole_bytes
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
    return Response(whole_bytes(answer), media_type="application/json")


async def _closing(chunks: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        await chunks.aclose()  # a client that went away stops the synthesis or the read
