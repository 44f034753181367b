"""The playground: a page at `/` that tries every model through the public `/v1` API (plain HTML, CSS and
JavaScript modules shipped as package data: no build step, nothing fetched from elsewhere)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

FILES = Path(__file__).parent / "ui"


def install(app: FastAPI) -> None:
    """Serve the page at `/` and its files under `/ui/`."""

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(FILES / "index.html")

    app.mount("/ui", StaticFiles(directory=FILES), name="ui")
