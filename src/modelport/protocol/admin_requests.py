"""Bodies of the organization API (projects, their keys and rate limits), as OpenAI's Admin API names
them, with modelport's `limits` where OpenAI has none."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class ModelLimits(BaseModel):
    """Requests and tokens per minute for one model."""

    model_config = ConfigDict(extra="forbid")

    rpm: int | None = Field(default=None, ge=1)
    tpm: int | None = Field(default=None, ge=1)

    @model_serializer(mode="wrap")
    def _set(self, write: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A limit not set is no limit: it is absent from the objects that show limits, not null.
        return {name: value for name, value in write(self).items() if value is not None}


class ProjectLimits(ModelLimits):
    """A project's or a key's limits: requests and tokens per minute, the models it may use (all when
    empty), and limits per model."""

    models: list[str] | None = None
    per_model: dict[str, ModelLimits] | None = None


class ProjectCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=256)
    limits: ProjectLimits | None = None


class ProjectModify(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=256)
    limits: ProjectLimits | None = None


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=256)
    role: Literal["member", "admin"] = "member"
    expires_in_days: float | None = Field(default=None, gt=0)
    limits: ProjectLimits | None = None


class RateLimitUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_requests_per_1_minute: int | None = Field(default=None, ge=1)
    max_tokens_per_1_minute: int | None = Field(default=None, ge=1)
