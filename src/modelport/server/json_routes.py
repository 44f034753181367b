"""The routes of every face read a JSON body through FastAPI, which validates it into the route's request
model; first, here, it is held to what `protocol.validation.check_json` asks (as `parse` does for the
in-process client and batch lines): its nesting bounded, so that no walk of it further on (a tool's schema
rewritten, a grammar made of it, a model serialized) runs out of recursion on a body made to be deep, and
its strings Unicode text."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute

from modelport.protocol.validation import MAX_DEPTH, check_json, too_deep

_FORMS = ("multipart/", "application/x-www-form-urlencoded")

# An escape of half a UTF-16 surrogate pair: valid JSON, which Python reads as a lone surrogate (a pair, or an
# escaped backslash before `ud800`, is looked at and let through).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class DepthBoundRoute(APIRoute):
    """A route whose JSON body is held to the nesting bound before FastAPI reads it (a body that is not JSON
    is left to FastAPI to refuse as it does)."""

    # Whether a body is read as JSON whatever its `Content-Type` says.
    any_content_type: ClassVar[bool] = False

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def bounded(request: Request) -> Response:
            if self.any_content_type:
                _read_as_json(request.scope)  # before the request's headers are first read (and kept)
            kind = request.headers.get("content-type", "")
            # Forms stream their files to FastAPI; any other body may be read as JSON (with no content type
            # too, as FastAPI does).
            if request.method in ("POST", "PUT", "PATCH") and not kind.startswith(_FORMS):
                body = await request.body()  # kept for FastAPI to read
                # JSON can nest no deeper than it has brackets, and holds a surrogate only as its escape: most
                # bodies are parsed only once, by FastAPI.
                if body.count(b"{") + body.count(b"[") > MAX_DEPTH or _SURROGATE_ESCAPE.search(body):
                    check_json(_loaded(body))
            return await handler(request)

        return bounded


class AnyTypeJsonRoute(DepthBoundRoute):
    """A route that reads its body as JSON whatever its `Content-Type` says, as Ollama's server does: its own
    documentation's `curl … -d '{…}'` sends a form's type, LiteLLM's `ollama_chat` none. Not from a web page
    (a request with an `Origin`), whose form or text a browser posts to any address without asking it first:
    those are refused as FastAPI refuses a body that is not JSON."""

    any_content_type = True


def _read_as_json(scope: Any) -> None:
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    if not any(name == b"origin" for name, _ in headers):
        kept = [(name, value) for name, value in headers if name != b"content-type"]
        scope["headers"] = [*kept, (b"content-type", b"application/json")]


def _loaded(body: bytes) -> Any:
    """The body as FastAPI will read it, or None where it is no JSON (FastAPI refuses it as it does)."""
    try:
        return orjson.loads(body)  # quick, and bounded in depth
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(body)  # FastAPI's reader, which takes a lone surrogate where orjson does not
    except RecursionError:
        raise too_deep() from None
    except ValueError:
        return None


def json_router(prefix: str, any_content_type: bool = False) -> APIRouter:
    """A router whose routes, below `prefix`, hold their JSON bodies to the nesting bound; `any_content_type`
    reads a body as JSON whatever its `Content-Type` says (but a web page's, `AnyTypeJsonRoute`)."""
    return APIRouter(prefix=prefix, route_class=AnyTypeJsonRoute if any_content_type else DepthBoundRoute)
