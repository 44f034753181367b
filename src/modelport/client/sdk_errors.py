"""Our errors as the `openai` package's exception classes, exactly as the SDK raises them for an HTTP
answer with the same status and body."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx2  # the HTTP library of openai>=3, whose response objects its exceptions wrap
import openai

from modelport.errors import ModelportError

_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


@contextmanager
def sdk_errors(path: str) -> Iterator[None]:
    """Raise our errors as the SDK's exception classes, exactly as if they had come over HTTP."""
    try:
        yield
    except ModelportError as error:
        raise to_sdk_error(error, path) from error


def to_sdk_error(error: ModelportError, path: str) -> openai.APIStatusError:
    """The `openai` exception the SDK would raise for this error's status and body."""
    body = error.body()
    response = httpx2.Response(
        error.status,
        json=body,
        headers=error.headers(),
        request=httpx2.Request("POST", f"http://modelport.in-process/v1{path}"),
    )
    cls = _STATUS_ERRORS.get(
        error.status, openai.InternalServerError if error.status >= 500 else openai.APIStatusError
    )
    # The SDK's text for an answer's error: the status and its message alone (the body is the error's `body`).
    message = body["error"].get("message")
    said = f"Error code: {error.status} - {message}" if message else f"Error code: {error.status}"
    return cls(said, response=response, body=body["error"])
