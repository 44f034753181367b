"""Every error the HTTP face sends is OpenAI-shaped (`{"error": {"message", "type", "param", "code"}}`), but
for the Messages API's, which are Anthropic's (`error_shapes`)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from modelport.errors import ModelportError, ServerError
from modelport.protocol.validation import invalid
from modelport.server.error_shapes import error_content

log = logging.getLogger("modelport.server")

_HTTP_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def error_response(
    status: int,
    message: str,
    type_: str,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A JSON error response in OpenAI's shape."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JSONResponse(body, status, headers=headers)


def install(app: FastAPI) -> None:
    """Map our errors, validation errors and Starlette's HTTP errors onto OpenAI's shape."""

    @app.exception_handler(ModelportError)
    async def _modelport(request: Request, error: ModelportError) -> Response:
        if error.status >= 500:
            log.error("%s", error.message, exc_info=error.__cause__)
        content = error_content(request.url.path, error)
        return Response(content, error.status, headers=error.headers(), media_type="application/json")

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, error: RequestValidationError) -> Response:
        refused = invalid(dict(error.errors()[0]))
        return Response(
            error_content(request.url.path, refused), refused.status, media_type="application/json"
        )

    @app.exception_handler(HTTPException)
    async def _http(request: Request, error: HTTPException) -> JSONResponse:
        message = str(error.detail)
        where = f"{request.method} {request.url.path}"
        # The router's own refusals: say what was asked for, in OpenAI's words for an unknown URL.
        if error.status_code == 404 and message == "Not Found":
            message = f"Invalid URL ({where}): modelport does not serve this endpoint."
        elif error.status_code == 405 and message == "Method Not Allowed":
            allowed = (error.headers or {}).get("Allow", "")
            message = f"Method not allowed ({where}): this endpoint takes {allowed or 'other methods'}."
        return error_response(
            error.status_code,
            message,
            _HTTP_TYPES.get(error.status_code, "invalid_request_error"),
            headers=dict(error.headers or {}),
        )

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, _: ClientDisconnect) -> Response:
        # The client left while its body was being read: nobody reads this answer, and it is logged as 499,
        # not as the server's fault.
        request.scope.setdefault("state", {})["client_gone"] = True
        return Response(status_code=499)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> Response:
        log.exception("unexpected error")
        content = error_content(request.url.path, ServerError(f"Internal error: {type(error).__name__}"))
        return Response(content, 500, media_type="application/json")
