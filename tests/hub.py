"""A Hugging Face Hub on 127.0.0.1, for huggingface_hub's real download path (`HF_ENDPOINT`): it serves
repositories made of real model files from folders, answers as the Hub does (its headers, ranges, the error
codes huggingface_hub turns into exceptions), and can drop a download halfway once, to test resuming."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

CHUNK = 1 << 20


@dataclass
class Hub:
    """Repositories (id → folder of files), and what was asked of them."""

    repos: dict[str, Path]
    interrupt_once: set[str] = field(default_factory=set)  # file paths whose first download is cut halfway
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, Range

    def commit(self, repo: str) -> str:
        return hashlib.sha1(repo.encode()).hexdigest()

    def files(self, repo: str) -> dict[str, Path]:
        root = self.repos[repo]
        return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self._route, methods=["GET", "HEAD"])])

    async def _route(self, request: Request) -> Response:
        path = request.url.path
        self.requests.append((request.method, path, request.headers.get("range")))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] in ("tree", "revision"):
            repo = "/".join(parts[2:4])
            if repo not in self.repos:
                return _not_found("RepoNotFound", "Repository not found")
            return JSONResponse(self._tree(repo) if parts[4] == "tree" else self._info(repo))
        if len(parts) >= 5 and parts[2] == "resolve":
            repo, filename = "/".join(parts[:2]), "/".join(parts[4:])
            if repo not in self.repos:
                return _not_found("RepoNotFound", "Repository not found")
            file = self.files(repo).get(filename)
            if file is None:
                return _not_found("EntryNotFound", "Entry not found")
            return self._file(request, repo, filename, file)
        return _not_found("RepoNotFound", "Not found")

    def _tree(self, repo: str) -> list[dict[str, Any]]:
        return [
            {"type": "file", "oid": self.commit(name), "size": p.stat().st_size, "path": name}
            for name, p in self.files(repo).items()
        ]

    def _info(self, repo: str) -> dict[str, Any]:
        siblings = [{"rfilename": name, "size": p.stat().st_size} for name, p in self.files(repo).items()]
        return {"id": repo, "modelId": repo, "sha": self.commit(repo), "siblings": siblings, "private": False}

    def _file(self, request: Request, repo: str, filename: str, file: Path) -> Response:
        size = file.stat().st_size
        start = int(request.headers.get("range", "bytes=0-").removeprefix("bytes=").split("-")[0] or 0)
        headers = {
            "X-Repo-Commit": self.commit(repo),
            "ETag": f'"{self.commit(repo + filename)}"',
            "Content-Length": str(size - start),
            "Accept-Ranges": "bytes",
        }
        status = 200
        if start:
            status, headers["Content-Range"] = 206, f"bytes {start}-{size - 1}/{size}"
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        cut = size // 2 if filename in self.interrupt_once and not start else None
        self.interrupt_once.discard(filename)
        return StreamingResponse(_read(file, start, cut), status_code=status, headers=headers)


async def _read(file: Path, start: int, cut: int | None) -> Any:
    with open(file, "rb") as source:  # noqa: ASYNC230 (a local file, read a megabyte at a time)
        source.seek(start)
        sent = start
        while chunk := source.read(CHUNK):
            if cut is not None and sent + len(chunk) > cut:
                yield chunk[: cut - sent]
                raise ConnectionAbortedError("the test hub drops this download halfway")
            sent += len(chunk)
            yield chunk


def _not_found(code: str, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=404, headers={"X-Error-Code": code})
