"""vLLM's demo endpoint `/generate`, outside `/v1`: not an OpenAI operation, so not in the operation table."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from modelport.protocol.generate_request import VllmGenerateRequest
from modelport.server.http_render import render
from modelport.server.json_routes import json_router
from modelport.server.operation_routes import service_of

router = json_router("")


@router.post("/generate")
async def generate(request: Request, body: VllmGenerateRequest) -> Response:
    """vLLM's demo endpoint: `{"text": [prompt + output, ...]}`, whole or as NUL-delimited frames of the
    text so far."""
    return render(await service_of(request).generate(body))
