"""The routes of every face read a JSON body through FastAPI, which validates it into the route's request
model; first, here, its nesting is bounded (`protocol.validation.check_depth`, as `parse` does for the
in-process client and batch lines), so that no walk of it further on (a tool's schema rewritten, a grammar
made of it, a model serialized) runs out of recursion on a body made to be deep."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute

from modelport.protocol.validation import MAX_DEPTH, check_depth

_FORMS = ("multipart/", "application/x-www-form-urlencoded")


class DepthBoundRoute(APIRoute):
    """A route whose JSON body is held to the nesting bound before FastAPI reads it (a body that is not JSON
    is left to FastAPI to refuse as it does)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def bounded(request: Request) -> Response:
            kind = request.headers.get("content-type", "")
            # Forms stream their files to FastAPI; any other body may be read as JSON (with no content type
            # too, as FastAPI does).
            if request.method in ("POST", "PUT", "PATCH") and not kind.startswith(_FORMS):
                body = await request.body()  # kept for FastAPI to read
                # JSON can nest no deeper than it has brackets: most bodies are parsed only once, by FastAPI.
                if body.count(b"{") + body.count(b"[") > MAX_DEPTH:
                    try:
                        data = orjson.loads(body)
                    except orjson.JSONDecodeError:
                        data = None
                    check_depth(data)
            return await handler(request)

        return bounded


def json_router(strict_content_type: bool = True) -> APIRouter:
    """A router whose routes hold their JSON bodies to the nesting bound; `strict_content_type` False reads
    a body sent with no `Content-Type` as JSON too (FastAPI refuses it by default)."""
    return APIRouter(route_class=DepthBoundRoute, strict_content_type=strict_content_type)
