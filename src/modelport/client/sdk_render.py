"""The in-process face's one renderer: every answer of the service, in whichever of its three shapes, as the
object the `openai` SDK gives for it — its own types, its stream wrapper, its binary response."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Generic, Literal, TypeVar

import anyio
import httpx2
from openai._legacy_response import HttpxBinaryResponseContent
from openai.types.audio import Transcription, TranscriptionVerbose, Translation, TranslationVerbose

from modelport.client.sdk_errors import sdk_errors
from modelport.protocol.answers import Binary, Events

T = TypeVar("T")
# What the SDK's method returns besides objects and streams of them: always its binary response (speech:
# SSE events too, as the bytes the HTTP face sends), text (a transcript in `text`, `srt`, `vtt`), or the
# bytes as they come (`with_streaming_response`).
Returns = Literal["objects", "binary", "text", "streamed"]


async def render(answer: Any, path: str, returns: Returns = "objects") -> Any:
    """A whole object as it is; events as an `AsyncStream` of the SDK's event objects; bytes as the SDK's
    binary response; or as `returns` says."""
    if isinstance(answer, Events):
        if returns == "binary":
            return binary_response(b"".join([piece async for piece in _framed(answer)]), "text/event-stream")
        if returns == "streamed":
            return StreamedSpeech(_framed(answer), "text/event-stream")
        return AsyncStream(answer.typed(), path)
    if isinstance(answer, Binary):
        if returns == "streamed":
            return StreamedSpeech(answer.pieces(), answer.media_type)
        content = await answer.read()
        return content.decode() if returns == "text" else binary_response(content, answer.media_type)
    return answer


async def _framed(events: Events[Any]) -> AsyncGenerator[bytes, None]:
    try:
        async for event in events.items:
            yield events.kind.frame(event)
    finally:
        await events.aclose()
    yield events.kind.end


def binary_response(content: bytes, media_type: str) -> HttpxBinaryResponseContent:
    """The SDK's own binary response type (`.content`, `.read()`, `.write_to_file()`, …), built locally."""
    response = httpx2.Response(200, content=content, headers={"content-type": media_type})
    return HttpxBinaryResponseContent(response)


def as_translation(result: Any) -> Any:
    """A transcription answer re-typed as the SDK's translation types."""
    if isinstance(result, TranscriptionVerbose):
        return TranslationVerbose.model_validate(result.model_dump(exclude={"words", "usage"}))
    if isinstance(result, Transcription):
        return Translation(text=result.text)
    return result


class AsyncStream(Generic[T]):
    """Like the SDK's `AsyncStream`: `async for` over events, `await close()`, `async with`."""

    def __init__(self, events: AsyncIterator[T], path: str) -> None:
        self._events = events
        self._path = path

    def __aiter__(self) -> AsyncStream[T]:
        return self

    async def __anext__(self) -> T:
        with sdk_errors(self._path):
            return await self._events.__anext__()

    async def close(self) -> None:
        """Stop the generation and free its slot."""
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    @property
    def response(self) -> AsyncStream[T]:
        """What the SDK's stream helpers close when they are done (its HTTP response; here the stream)."""
        return self

    async def aclose(self) -> None:
        """The same as `close()`."""
        await self.close()

    async def __aenter__(self) -> AsyncStream[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class StreamedSpeech:
    """Like the SDK's streamed binary response: the bytes as they are made."""

    def __init__(self, chunks: AsyncGenerator[bytes, None], media_type: str) -> None:
        self._chunks = chunks
        self.headers = {"content-type": media_type}

    async def iter_bytes(self, chunk_size: int | None = None) -> AsyncIterator[bytes]:
        """Each piece as soon as it is made."""
        async for chunk in self._chunks:
            yield chunk

    async def read(self) -> bytes:
        """All the bytes."""
        return b"".join([chunk async for chunk in self._chunks])

    async def stream_to_file(self, file: str | os.PathLike[str], *, chunk_size: int | None = None) -> None:
        """Write the bytes to `file` as they arrive."""
        async with await anyio.open_file(file, "wb") as out:
            async for chunk in self._chunks:
                await out.write(chunk)

    async def close(self) -> None:
        """Stop the synthesis."""
        await self._chunks.aclose()
