"""An error as the face its request came through shapes it: Anthropic's (`{"type": "error", "error": {...}}`)
for the Messages API, Ollama's (`{"error": "..."}`) for `/api`, OpenAI's (`{"error": {message, type, param,
code}}`) for every other path. The status and headers are the same on every face. The faces' streams end
with an error in the same shapes (`anthropic_error`, `ollama_error`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from modelport.errors import ModelportError

if TYPE_CHECKING:
    from anthropic.types import ErrorResponse

ANTHROPIC_PATHS = ("/v1/messages",)
OLLAMA_PATHS = ("/api/",)
# Anthropic's error types, by status.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
}


def error_content(path: str, error: ModelportError) -> bytes:
    """The body of `error`'s response to a request for `path`."""
    if path.startswith(ANTHROPIC_PATHS):
        return anthropic_error(error).model_dump_json(exclude_unset=True).encode()
    if path.startswith(OLLAMA_PATHS):
        return ollama_error(error)
    return orjson.dumps(error.body())


def anthropic_error(error: ModelportError) -> ErrorResponse:
    """An error in Anthropic's shape: its type by the status, our message."""
    from anthropic.types import ErrorResponse  # where the face is used: see `anthropic.routes`

    kind = anthropic_error_type(error.status)
    return ErrorResponse.model_validate({"type": "error", "error": {"type": kind, "message": _said(error)}})


def anthropic_error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    return _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def ollama_error(error: ModelportError) -> bytes:
    """An error in Ollama's shape (a whole answer's body, or a stream's last line)."""
    return orjson.dumps({"error": _said(error)})


def _said(error: ModelportError) -> str:
    """The message after the field at fault: these shapes have no `param`, so it is named first (where the
    message does not name it already, as OpenAI's "Invalid value for 'x'" does)."""
    if error.param and f"'{error.param}'" not in error.message:
        return f"{error.param}: {error.message}"
    return error.message
