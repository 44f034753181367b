"""An error as the face its request came through shapes it: Anthropic's (`{"type": "error", "error": {...}}`)
for the Messages API, Ollama's (`{"error": "..."}`) for `/api`, OpenAI's (`{"error": {message, type, param,
code}}`) for every other path. The status and headers are the same on every face."""

from __future__ import annotations

import orjson

from modelport.errors import ModelportError
from modelport.server.anthropic.from_chat import error_body

ANTHROPIC_PATHS = ("/v1/messages",)
OLLAMA_PATHS = ("/api/",)


def error_content(path: str, error: ModelportError) -> bytes:
    """The body of `error`'s response to a request for `path`."""
    if path.startswith(ANTHROPIC_PATHS):
        return error_body(error).model_dump_json(exclude_unset=True).encode()
    if path.startswith(OLLAMA_PATHS):
        said = f"{error.param}: {error.message}" if error.param else error.message
        return orjson.dumps({"error": said})
    return orjson.dumps(error.body())
