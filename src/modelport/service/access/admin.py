"""Projects and keys, managed from the command line and the organization API, in the shapes of OpenAI's
Admin API (`/v1/organization/projects`, its `api_keys` and `rate_limits`)."""

from __future__ import annotations

import re
import time
from typing import Any, Literal

from openai.types.admin.organization.projects.api_key_delete_response import APIKeyDeleteResponse
from openai.types.admin.organization.projects.project_api_key import Owner, OwnerServiceAccount

from modelport.context import DEFAULT_PROJECT
from modelport.errors import InvalidRequestError, NotFoundError, StoreDisabledError
from modelport.ids import new_id
from modelport.protocol.admin_requests import ProjectLimits
from modelport.protocol.organization import CreatedProjectKey, LimitedProject, ProjectKey, ProjectModelLimit
from modelport.service.access.keys import Keys, digest, new_key, redacted
from modelport.store import Store

_NAME = re.compile(r"[^\x00-\x1f]{1,256}")


def limits_of(
    rpm: int | None = None,
    tpm: int | None = None,
    models: list[str] | None = None,
    per_model: dict[str, dict[str, int]] | None = None,
) -> dict[str, Any]:
    """Limits as stored, checked: requests and tokens per minute, allowed models, and per-model limits."""
    found: dict[str, Any] = {}
    for name, value in (("rpm", rpm), ("tpm", tpm)):
        if value is not None:
            found[name] = _positive(value, name)
    if models:
        found["models"] = list(models)
    if per_model:
        found["per_model"] = {
            model: {k: _positive(v, k) for k, v in given.items() if k in ("rpm", "tpm") and v is not None}
            for model, given in per_model.items()
        }
    return found


class Admin:
    """Create, list, change and archive projects; create, list and revoke their keys."""

    def __init__(self, store: Store | None, keys: Keys) -> None:
        self.store = store
        self.keys = keys

    async def create_project(self, name: str, limits: dict[str, Any] | None = None) -> LimitedProject:
        """A new project (a 409 if the name is taken)."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidRequestError("A project needs a name of 1 to 256 characters.", param="name")
        row = {
            "id": new_id("proj", "_"),
            "name": name,
            "created": int(time.time()),
            "archived_at": None,
            "limits": limits or {},
        }
        await self._store().projects.create(row)
        return _project(row)

    async def projects(self, include_archived: bool = False) -> list[LimitedProject]:
        """Every project (the archived ones only if asked)."""
        rows = await self._store().projects.all()
        return [_project(r) for r in rows if include_archived or r["archived_at"] is None]

    async def project(self, name_or_id: str) -> LimitedProject:
        """One project, by name or id (a 404 if none)."""
        return _project(await self._project_row(name_or_id))

    async def modify_project(
        self, name_or_id: str, *, name: str | None = None, limits: dict[str, Any] | None = None
    ) -> LimitedProject:
        """Rename a project, or replace its limits."""
        row = await self._project_row(name_or_id)
        values: dict[str, Any] = {}
        if name is not None:
            if not _NAME.fullmatch(name):
                raise InvalidRequestError("A project needs a name of 1 to 256 characters.", param="name")
            values["name"] = name
        if limits is not None:
            values["limits"] = limits
        if values:
            await self._store().projects.change(row["id"], **values)
            self.keys.forget()
        return await self.project(row["id"])

    async def archive_project(self, name_or_id: str) -> LimitedProject:
        """Archive a project: its keys stop working; what it stored stays."""
        row = await self._project_row(name_or_id)
        if row["id"] == DEFAULT_PROJECT:
            raise InvalidRequestError("The default project cannot be archived.", param="project_id")
        if row["archived_at"] is None:
            await self._store().projects.change(row["id"], archived_at=int(time.time()))
            self.keys.forget()
        return await self.project(row["id"])

    async def create_key(
        self,
        project: str,
        *,
        name: str = "",
        admin: bool = False,
        expires_days: float | None = None,
        limits: dict[str, Any] | None = None,
    ) -> CreatedProjectKey:
        """A new key of `project`: the object, with the key itself in `value`, shown this once."""
        row = await self._project_row(project)
        if row["archived_at"] is not None:
            raise InvalidRequestError(f"The project '{row['name']}' is archived.", param="project_id")
        if expires_days is not None and expires_days <= 0:
            raise InvalidRequestError("expires must be a positive number of days.", param="expires")
        key = new_key()
        now = int(time.time())
        record = {
            "id": new_id("key", "_"),
            "project": row["id"],
            "hash": digest(key),
            "redacted": redacted(key),
            "name": name or "",
            "role": "admin" if admin else "member",
            "created": now,
            "expires_at": now + int(expires_days * 86400) if expires_days is not None else None,
            "last_used_at": None,
            "revoked_at": None,
            "limits": limits or {},
        }
        await self._store().keys.create(record)
        self.keys.forget()
        return CreatedProjectKey(**_key(record).model_dump(), value=key)

    async def key_list(self, project: str | None = None) -> list[ProjectKey]:
        """The keys of a project, or of every project."""
        project_id = (await self._project_row(project))["id"] if project else None
        await self.keys.flush()
        return [_key(r) for r in await self._store().keys.of(project_id)]

    async def key(self, key_id: str, project: str | None = None) -> ProjectKey:
        """One key (of `project`, when given)."""
        return _key(await self._key_row(key_id, project))

    async def revoke_key(self, key_id: str, project: str | None = None) -> APIKeyDeleteResponse:
        """Revoke a key: refused from its next request here, within `key_cache_seconds` elsewhere."""
        await self._key_row(key_id, project)
        await self._store().keys.revoke(key_id)
        self.keys.forget()
        return APIKeyDeleteResponse(object="organization.project.api_key.deleted", id=key_id, deleted=True)

    async def rate_limits(self, project: str) -> list[ProjectModelLimit]:
        """A project's per-model limits as OpenAI lists them (`rl-<model>`), the project-wide one as
        `rl-*`."""
        row = await self._project_row(project)
        limits = row["limits"] or {}
        listed = [_rate_limit("*", limits)]
        return listed + [_rate_limit(m, v) for m, v in sorted((limits.get("per_model") or {}).items())]

    async def update_rate_limit(
        self,
        project: str,
        rate_limit_id: str,
        max_requests_per_1_minute: int | None = None,
        max_tokens_per_1_minute: int | None = None,
    ) -> ProjectModelLimit:
        """Set a project's limit for one model (`rl-<model>`) or for all its requests (`rl-*`)."""
        row = await self._project_row(project)
        if not rate_limit_id.startswith("rl-") or len(rate_limit_id) < 4:
            raise NotFoundError(f"No rate limit found with id '{rate_limit_id}'.", param="rate_limit_id")
        model = rate_limit_id.removeprefix("rl-")
        limits = dict(row["limits"] or {})
        changes = {"rpm": max_requests_per_1_minute, "tpm": max_tokens_per_1_minute}
        if model == "*":
            target = limits
        else:
            per_model = dict(limits.get("per_model") or {})
            target = per_model[model] = dict(per_model.get(model) or {})
            limits["per_model"] = per_model
        for name, value in changes.items():
            if value is not None:
                target[name] = _positive(value, name)
        await self._store().projects.change(row["id"], limits=limits)
        self.keys.forget()
        return _rate_limit(model, target)

    async def _project_row(self, name_or_id: str) -> dict[str, Any]:
        row = await self._store().projects.named(name_or_id)
        if row is None:
            raise NotFoundError(f"No project found with name or id '{name_or_id}'.", param="project_id")
        return row

    async def _key_row(self, key_id: str, project: str | None) -> dict[str, Any]:
        row = await self._store().keys.get(key_id)
        if row is not None and project is not None:
            owner = await self._project_row(project)
            row = row if row["project"] == owner["id"] else None
        if row is None:
            raise NotFoundError(f"No API key found with id '{key_id}'.", param="key_id")
        return row

    def _store(self) -> Store:
        if self.store is None:
            raise StoreDisabledError("Projects and keys live in the store, and this server stores nothing.")
        return self.store


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequestError(f"{name} must be a positive whole number.", param=name)
    return value


def _project(row: dict[str, Any]) -> LimitedProject:
    return LimitedProject(
        id=row["id"],
        object="organization.project",
        name=row["name"],
        created_at=row["created"],
        archived_at=row["archived_at"],
        status="archived" if row["archived_at"] is not None else "active",
        limits=ProjectLimits.model_validate(row["limits"] or {}),
    )


def _key(row: dict[str, Any]) -> ProjectKey:
    expired = row["expires_at"] is not None and row["expires_at"] <= time.time()
    status: Literal["active", "revoked", "expired"] = (
        "revoked" if row["revoked_at"] else "expired" if expired else "active"
    )
    account = OwnerServiceAccount(id=row["id"], name=row["name"], created_at=row["created"], role=row["role"])
    return ProjectKey(
        id=row["id"],
        object="organization.project.api_key",
        name=row["name"],
        redacted_value=row["redacted"],
        created_at=row["created"],
        last_used_at=row["last_used_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        status=status,
        owner_project_access="active" if status == "active" else "inactive",
        role=row["role"],
        project_id=row["project"],
        owner=Owner(type="service_account", service_account=account),
        limits=ProjectLimits.model_validate(row["limits"] or {}),
    )


def _rate_limit(model: str, limits: dict[str, Any]) -> ProjectModelLimit:
    return ProjectModelLimit(
        id=f"rl-{model}",
        model=model,
        max_requests_per_1_minute=limits.get("rpm"),
        max_tokens_per_1_minute=limits.get("tpm"),
    )
