"""Every error the HTTP face sends is OpenAI-shaped (`{"error": {"message", "type", "param", "code"}}`), but
for the Messages API's and Ollama's API's, which are theirs (`error_shapes`): the router's refusals too."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from modelport.errors import ModelportError, RouteError, ServerError
from modelport.protocol.validation import invalid, telling
from modelport.server.error_shapes import error_content
from modelport.service.operation_table import OPERATIONS

log = logging.getLogger("modelport.server")

_HTTP_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def _shaped(request: Request, error: ModelportError, headers: dict[str, str] | None = None) -> Response:
    """`error` as the face of `request`'s path shapes it."""
    return Response(
        error_content(request.url.path, error),
        error.status,
        headers={**error.headers(), **(headers or {})},
        media_type="application/json",
    )


def install(app: FastAPI) -> None:
    """Map our errors, validation errors and Starlette's HTTP errors onto each face's shape."""

    @app.exception_handler(ModelportError)
    async def _modelport(request: Request, error: ModelportError) -> Response:
        if error.status >= 500:
            log.error("%s", error.message, exc_info=error.__cause__)
        return _shaped(request, error)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, error: RequestValidationError) -> Response:
        return _shaped(request, invalid(telling(error.errors())))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, error: HTTPException) -> Response:
        message = str(error.detail)
        refused: ModelportError
        # The router's own refusals: say what was asked for, in OpenAI's words for an unknown URL.
        if error.status_code == 404 and message == "Not Found":
            refused = RouteError.unknown(request.method, request.url.path)
        elif error.status_code == 405 and message == "Method Not Allowed":
            # Every method the path's rows take, as the in-process client says it: Starlette's `Allow` names
            # the first route's alone.
            allowed = ", ".join(_row_methods(request.url.path)) or (error.headers or {}).get("Allow", "")
            refused = RouteError.wrong_method(request.method, request.url.path, allowed)
            return _shaped(request, refused, {**(error.headers or {}), "Allow": allowed})
        else:
            refused = ModelportError(message)
            refused.status, refused.type = (
                error.status_code,
                _HTTP_TYPES.get(error.status_code, "invalid_request_error"),
            )
        return _shaped(request, refused, dict(error.headers or {}))

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, _: ClientDisconnect) -> Response:
        # The client left while its body was being read: nobody reads this answer, and it is logged as 499,
        # not as the server's fault.
        request.scope.setdefault("state", {})["client_gone"] = True
        return Response(status_code=499)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> Response:
        log.exception("unexpected error")
        return _shaped(request, ServerError(f"Internal error: {type(error).__name__}"))


def _row_methods(path: str) -> list[str]:
    """The methods the operation table's rows take at `path` (none where it is no row's)."""
    for prefix in ("/v1/openai/v1/", "/v1/"):
        if path.startswith(prefix):
            return OPERATIONS.methods("/" + path.removeprefix(prefix))
    return []
