"""`POST /generate`: vLLM's original demo endpoint, beside `/v1`. Frames of a streamed answer are JSON
objects each followed by a NUL byte (`iter_lines(delimiter=b"\\0")` reads them)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from modelport.errors import ModelportError
from modelport.protocol.generate import GenerateRequest
from modelport.server.routes import service_of

router = APIRouter()


@router.post("/generate")
async def generate(request: Request, body: GenerateRequest) -> Response:
    """`{"text": [prompt + output, ...]}`, whole or as NUL-delimited frames of the text so far."""
    result = await service_of(request).generate(body)
    if isinstance(result, dict):
        return Response(orjson.dumps(result), media_type="application/json")
    return StreamingResponse(_nul_frames(result))


async def _nul_frames(frames: AsyncGenerator[dict[str, Any], None]) -> AsyncIterator[bytes]:
    try:
        async for frame in frames:
            yield orjson.dumps(frame) + b"\0"
    except ModelportError as error:
        yield orjson.dumps(error.body()) + b"\0"
    finally:
        await frames.aclose()
