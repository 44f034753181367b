"""The organization API, for admin keys only (the middleware sees to that): projects, their keys and rate
limits, and usage, in the shapes of OpenAI's Admin and Usage APIs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from modelport.protocol.admin_requests import (
    KeyCreate,
    Limits,
    ProjectCreate,
    ProjectModify,
    RateLimitUpdate,
)
from modelport.server.http_render import json_body
from modelport.server.routes import service_of

router = APIRouter(prefix="/organization")


def _limits(given: Limits | None) -> dict[str, Any] | None:
    return None if given is None else given.model_dump(exclude_none=True)


def _page(data: list[dict[str, Any]], after: str | None, limit: int) -> dict[str, Any]:
    ids = [item["id"] for item in data]
    start = ids.index(after) + 1 if after in ids else 0
    shown = data[start : start + limit]
    return {
        "object": "list",
        "data": shown,
        "first_id": shown[0]["id"] if shown else None,
        "last_id": shown[-1]["id"] if shown else None,
        "has_more": start + limit < len(data),
    }


@router.get("/projects")
async def list_projects(
    request: Request,
    after: str | None = None,
    limit: int = Query(20, ge=1, le=100),
    include_archived: bool = False,
) -> Response:
    """Every project, oldest first."""
    return json_body(_page(await service_of(request).access.admin.projects(include_archived), after, limit))


@router.post("/projects")
async def create_project(request: Request, body: ProjectCreate) -> Response:
    """A new project."""
    return json_body(await service_of(request).access.admin.create_project(body.name, _limits(body.limits)))


@router.get("/projects/{project_id}")
async def retrieve_project(request: Request, project_id: str) -> Response:
    """One project."""
    return json_body(await service_of(request).access.admin.project(project_id))


@router.post("/projects/{project_id}")
async def modify_project(request: Request, project_id: str, body: ProjectModify) -> Response:
    """Rename a project or replace its limits."""
    admin = service_of(request).access.admin
    return json_body(await admin.modify_project(project_id, name=body.name, limits=_limits(body.limits)))


@router.post("/projects/{project_id}/archive")
async def archive_project(request: Request, project_id: str) -> Response:
    """Archive a project: its keys stop working."""
    return json_body(await service_of(request).access.admin.archive_project(project_id))


@router.get("/projects/{project_id}/api_keys")
async def list_keys(
    request: Request, project_id: str, after: str | None = None, limit: int = Query(20, ge=1, le=100)
) -> Response:
    """A project's keys (never the keys themselves)."""
    return json_body(_page(await service_of(request).access.admin.key_list(project_id), after, limit))


@router.post("/projects/{project_id}/api_keys")
async def create_key(request: Request, project_id: str, body: KeyCreate) -> Response:
    """A new key of the project; `value` holds the key, shown this once."""
    created = await service_of(request).access.admin.create_key(
        project_id,
        name=body.name,
        admin=body.role == "admin",
        expires_days=body.expires_in_days,
        limits=_limits(body.limits),
    )
    return json_body(created)


@router.get("/projects/{project_id}/api_keys/{key_id}")
async def retrieve_key(request: Request, project_id: str, key_id: str) -> Response:
    """One key of the project."""
    return json_body(await service_of(request).access.admin.key(key_id, project_id))


@router.delete("/projects/{project_id}/api_keys/{key_id}")
async def revoke_key(request: Request, project_id: str, key_id: str) -> Response:
    """Revoke a key."""
    return json_body(await service_of(request).access.admin.revoke_key(key_id, project_id))


@router.get("/projects/{project_id}/rate_limits")
async def list_rate_limits(request: Request, project_id: str) -> Response:
    """The project's limits: `rl-*` for all its requests, `rl-<model>` per model."""
    return json_body(await service_of(request).access.admin.rate_limits(project_id))


@router.post("/projects/{project_id}/rate_limits/{rate_limit_id}")
async def update_rate_limit(
    request: Request, project_id: str, rate_limit_id: str, body: RateLimitUpdate
) -> Response:
    """Set one of the project's limits."""
    updated = await service_of(request).access.admin.update_rate_limit(
        project_id, rate_limit_id, body.max_requests_per_1_minute, body.max_tokens_per_1_minute
    )
    return json_body(updated)


@router.get("/usage/{kind}")
async def usage(
    request: Request,
    kind: str,
    start_time: int,
    end_time: int | None = None,
    bucket_width: str = "1d",
    limit: int | None = None,
    page: str | None = None,
) -> Response:
    """Usage per time bucket (`completions`, `embeddings`, `audio_speeches`, `audio_transcriptions`,
    `images`), as OpenAI's Usage API answers. Lists (`project_ids`, `models`, `group_by`) come as repeated
    parameters, with or without `[]` (the SDKs send them with)."""

    def listed(name: str) -> list[str] | None:
        values = request.query_params.getlist(name) + request.query_params.getlist(f"{name}[]")
        return values or None

    found = await service_of(request).access.meter.page(
        kind,
        start_time=start_time,
        end_time=end_time,
        bucket_width=bucket_width,
        project_ids=listed("project_ids"),
        models=listed("models"),
        group_by=listed("group_by"),
        limit=limit,
        page=page,
    )
    return json_body(found)
