"""Objects of the organization API: OpenAI's Admin API types for projects and their keys, with what
modelport adds (limits, a key's role and status), and a rate limit of modelport's own where OpenAI's cannot
say "no limit"."""

from __future__ import annotations

from typing import Any, Literal

from openai.types.admin.organization.project import Project
from openai.types.admin.organization.projects.project_api_key import ProjectAPIKey
from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

from modelport.protocol.admin_requests import ProjectLimits


class LimitedProject(Project):
    """A project, with the limits its requests are held to."""

    status: Literal["active", "archived"]
    limits: ProjectLimits

    @model_serializer(mode="wrap")
    def _known(self, write: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # What modelport has no notion of (an external key, data residency) is absent, not null.
        written: dict[str, Any] = write(self)
        for name in ("external_key_id", "residency"):
            if written.get(name) is None:
                written.pop(name, None)
        return written


class ProjectKey(ProjectAPIKey):
    """A project's key (never the key itself): whose it is, its role and limits, and whether it still
    works."""

    project_id: str
    role: Literal["member", "admin"]
    status: Literal["active", "revoked", "expired"]
    revoked_at: int | None
    limits: ProjectLimits

    @model_serializer(mode="wrap")
    def _owned(self, write: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The owner is a service account, as OpenAI shows one: no null `user` beside it.
        written: dict[str, Any] = write(self)
        owner = written.get("owner") or {}
        if owner.get("user") is None:
            owner.pop("user", None)
        return written


class CreatedProjectKey(ProjectKey):
    """A key as it is made: the only time `value`, the key itself, is shown."""

    value: str


class ProjectModelLimit(BaseModel):
    """One of a project's rate limits, in the shape of OpenAI's `project.rate_limit` (`rl-<model>`, or
    `rl-*` for all of the project's requests); null where no limit is set, which OpenAI's type (always a
    number) cannot say."""

    object: Literal["project.rate_limit"] = "project.rate_limit"
    id: str
    model: str
    max_requests_per_1_minute: int | None
    max_tokens_per_1_minute: int | None
