"""The organization API (admin keys only), in the shapes of OpenAI's Admin and Usage APIs: each
endpoint's call into the service."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from modelport.errors import InvalidRequestError
from modelport.protocol.admin_requests import (
    KeyCreate,
    ProjectCreate,
    ProjectLimits,
    ProjectModify,
    RateLimitUpdate,
)
from modelport.protocol.answers import ListPage
from modelport.protocol.organization import LimitedProject, ProjectKey
from modelport.service.operations import QueryItems

if TYPE_CHECKING:
    from modelport.service import Service


from modelport.service.endpoints.query import listed


def _limits(given: ProjectLimits | None) -> dict[str, Any] | None:
    return None if given is None else given.model_dump(exclude_none=True)


def _page(data: Sequence[LimitedProject | ProjectKey], after: str | None, limit: int) -> ListPage[Any]:
    if not 1 <= limit <= 100:
        raise InvalidRequestError("limit must be between 1 and 100.", param="limit")
    ids = [item.id for item in data]
    start = ids.index(after) + 1 if after in ids else 0
    return ListPage(list(data[start : start + limit]), has_more=start + limit < len(data))


async def list_projects(
    service: Service, after: str | None = None, limit: int = 20, include_archived: bool = False
) -> object:
    """Every project, oldest first."""
    return _page(await service.access.admin.projects(include_archived), after, limit)


async def create_project(service: Service, body: ProjectCreate) -> object:
    """A new project."""
    return await service.access.admin.create_project(body.name, _limits(body.limits))


async def retrieve_project(service: Service, project_id: str) -> object:
    """One project."""
    return await service.access.admin.project(project_id)


async def modify_project(service: Service, project_id: str, body: ProjectModify) -> object:
    """Rename a project or replace its limits."""
    return await service.access.admin.modify_project(project_id, name=body.name, limits=_limits(body.limits))


async def archive_project(service: Service, project_id: str) -> object:
    """Archive a project: its keys stop working."""
    return await service.access.admin.archive_project(project_id)


async def list_project_keys(
    service: Service, project_id: str, after: str | None = None, limit: int = 20
) -> object:
    """A project's keys (never the keys themselves)."""
    return _page(await service.access.admin.key_list(project_id), after, limit)


async def create_project_key(service: Service, project_id: str, body: KeyCreate) -> object:
    """A new key of the project; `value` holds the key, shown this once."""
    return await service.access.admin.create_key(
        project_id,
        name=body.name,
        admin=body.role == "admin",
        expires_days=body.expires_in_days,
        limits=_limits(body.limits),
    )


async def retrieve_project_key(service: Service, project_id: str, key_id: str) -> object:
    """One key of the project."""
    return await service.access.admin.key(key_id, project_id)


async def delete_project_key(service: Service, project_id: str, key_id: str) -> object:
    """Revoke a key."""
    return await service.access.admin.revoke_key(key_id, project_id)


async def list_project_rate_limits(service: Service, project_id: str) -> object:
    """The project's limits: `rl-*` for all its requests, `rl-<model>` per model."""
    return ListPage(await service.access.admin.rate_limits(project_id), has_more=False)


async def update_project_rate_limit(
    service: Service, project_id: str, rate_limit_id: str, body: RateLimitUpdate
) -> object:
    """Set one of the project's limits."""
    return await service.access.admin.update_rate_limit(
        project_id, rate_limit_id, body.max_requests_per_1_minute, body.max_tokens_per_1_minute
    )


async def usage(
    service: Service,
    kind: str,
    query: QueryItems,
    start_time: int,
    end_time: int | None = None,
    bucket_width: str = "1d",
    limit: int | None = None,
    page: str | None = None,
) -> object:
    """Usage per time bucket (`completions`, `embeddings`, `audio_speeches`, `audio_transcriptions`,
    `images`), as OpenAI's Usage API answers. Lists (`project_ids`, `models`, `group_by`) come as repeated
    parameters, with or without `[]` (the SDKs send them with)."""
    return await service.access.meter.page(
        kind,
        start_time=start_time,
        end_time=end_time,
        bucket_width=bucket_width,
        project_ids=listed(query, "project_ids") or None,
        models=listed(query, "models") or None,
        group_by=listed(query, "group_by") or None,
        limit=limit,
        page=page,
    )
