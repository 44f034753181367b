"""`create_app(settings)`: the FastAPI application over one `Service`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from modelport import __version__, metrics
from modelport.machine import keep_out_of_collections
from modelport.server import (
    documented_answers,
    error_handlers,
    generate_route,
    operation_routes,
    playground,
    realtime_routes,
    responses_socket,
)
from modelport.server.anthropic import message_batches
from modelport.server.anthropic import routes as anthropic_routes
from modelport.server.host_guard import HostGuard
from modelport.server.middleware import Authenticate, BodyLimit, Disconnects, OpenAIMirror, RequestRecords
from modelport.server.ollama import routes as ollama_routes
from modelport.service import Service
from modelport.settings import Settings

log = logging.getLogger("modelport.server")


def _settle(loading: asyncio.Task[None]) -> None:
    """Once the models are loaded, keep what start-up made out of the collector's full passes: it lives as
    long as the server (`machine.keep_out_of_collections`; in a 5-minute soak, every pass made every request
    wait)."""
    if not loading.cancelled():
        keep_out_of_collections()
        metrics.watch_gc()


def create_app(settings: Settings | None = None, service: Service | None = None) -> FastAPI:
    """Build the HTTP app; OpenAI's routes are served at `/v1` and at `/v1/openai/v1`."""
    service = service or Service.from_settings(settings or Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Models load in the background so /health can answer 503 while they do; requests wait for them.
        loading = asyncio.create_task(service.start())
        loading.add_done_callback(_settle)
        app.state.loading = loading
        try:
            yield
        finally:
            loading.cancel()
            await service.realtime.calls.close()
            await service.close()
            # The metrics' registry is the process's: read from this service no more, nor keep it alive.
            metrics.SLOTS.sources.remove(slots)
            metrics.UPSTREAMS.sources.remove(pools)

    app = FastAPI(title="modelport", version=__version__, lifespan=lifespan)
    app.state.service = service
    error_handlers.install(app)
    routers = (
        operation_routes.router(),
        realtime_routes.router,
        responses_socket.router,
        anthropic_routes.router,
        message_batches.router,
        ollama_routes.router,
        generate_route.router,
    )
    for router in routers:
        # The routers' routes, made once a process, are the app's own: routes of an included router FastAPI
        # (0.165) makes again for each app and each inclusion, at the first request that passes them
        # (~0.2 s of CPU on 2 cores for the operations' alone, on every server's first request).
        app.router.routes.extend(router.routes)
    # The faces' answers in the document, their packages imported when it is first made.
    documented_answers.documented(app, anthropic_routes.answers, "Anthropic")
    documented_answers.documented(app, ollama_routes.answers, "Ollama")
    settings = service.settings
    if settings.ui:
        playground.install(app)
    # Added innermost first: records see every answer, CORS answers preflights before keys are asked for.
    app.add_middleware(OpenAIMirror)
    app.add_middleware(Disconnects)
    app.add_middleware(BodyLimit, settings=settings)
    app.add_middleware(
        Authenticate,
        access=service.access,
        protect_metrics=settings.protect_metrics,
        open_metrics=settings.open_metrics,
    )
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=[
                "Authorization",
                "Content-Type",
                "X-Request-Id",
                "OpenAI-Organization",
                "X-OpenAI-Agents-SDK",
            ],
            # `Location` names a WebRTC call (the Agents SDK reads its id there).
            expose_headers=["X-Request-Id", "Retry-After", "retry-after-ms", "Location"],
        )
    if settings.on_loopback():
        app.add_middleware(HostGuard, allowed=settings.allowed_hosts, origins=settings.cors_origins)
    app.add_middleware(RequestRecords)
    slots, pools = service.manager.loaded_models, lambda: service.manager.registry.pools
    metrics.SLOTS.sources.append(slots)
    metrics.UPSTREAMS.sources.append(pools)

    # HEAD as GET where monitors and load balancers ask whether the server is there (HTTP requires it of
    # every GET resource; FastAPI's routes take only the methods named).
    @app.api_route("/metrics", methods=["GET", "HEAD"], include_in_schema=False)
    async def prometheus() -> Response:
        """Prometheus metrics: requests, latencies, tokens, slots and queues per model."""
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/health")
    async def health(request: Request) -> JSONResponse:
        """200 once the models to preload are loaded; 503 while they load or if one failed. Each upstream
        replica's state is listed too (a replica that is down does not make modelport unhealthy)."""
        # Read from the app, not closed over: FastAPI caches what it learns of an endpoint for the process,
        # and a stopped server's service (its models) would stay alive with it.
        service: Service = request.app.state.service
        loading: asyncio.Task[None] | None = getattr(request.app.state, "loading", None)
        upstreams: dict[str, Any] = (
            {"upstreams": service.upstreams()} if service.manager.registry.pools else {}
        )
        if service.store is not None:
            upstreams["store"] = service.store.state()
        if loading is None or not loading.done():
            return JSONResponse({"status": "loading", **upstreams}, 503)
        if loading.cancelled() or loading.exception() is not None:
            return JSONResponse({"status": "error", "error": str(loading.exception()), **upstreams}, 503)
        return JSONResponse({"status": "ok", **upstreams})

    app.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False)  # GET's, documented once
    return app
