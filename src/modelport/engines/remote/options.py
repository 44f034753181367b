"""What a `engine = "remote"` entry of models.toml may say, checked when the configuration is read."""

from __future__ import annotations

import os
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from modelport.predictors.contract import Capability

DEFAULT_CAPABILITIES = (Capability.CHAT, Capability.COMPLETION)


class RemoteOptions(BaseModel):
    """One remote model on its replicas, or (`discover`) every model a set of upstreams lists."""

    model_config = ConfigDict(extra="forbid")

    upstreams: list[str] = Field(
        min_length=1, description="base URLs of the replicas, e.g. http://gpu-a:8000/v1"
    )
    upstream_model: str | None = Field(default=None, description="the name the upstream knows the model by")
    api_key_env: str | None = Field(
        default=None, description="environment variable holding the upstream's key"
    )
    api_key_file: str | None = Field(default=None, description="file holding the upstream's key")
    capabilities: list[Capability] | None = None
    discover: bool = False
    allowed_models: list[str] | None = Field(
        default=None, description="glob patterns of discovered ids to serve"
    )
    prefix: str | None = Field(
        default=None, description="put before discovered ids (default: the entry's id + /)"
    )
    refresh: float = Field(default=300.0, gt=0, description="seconds between refreshes of a discovered list")
    routing: Literal["least", "session", "prefix"] = "least"
    health: str = Field(default="models", description="`models` ({base}/models) or a path such as /health")
    health_interval: float = Field(default=10.0, gt=0)
    cooldown: float = Field(default=5.0, gt=0, description="seconds a failing replica stays out")
    connect_timeout: float = Field(default=5.0, gt=0)
    first_byte_timeout: float | None = Field(default=None, gt=0, description="default: the model's timeout")
    attempts: int = Field(default=3, ge=1, description="replicas a request may try before it fails")
    max_in_flight: int = Field(default=64, ge=1, description="requests per replica (the model's slots)")

    @model_validator(mode="before")
    @classmethod
    def _no_key_inline(cls, data: object) -> object:
        if isinstance(data, dict) and "api_key" in data:
            raise ValueError(
                "an upstream's key does not go in models.toml: name an environment variable (api_key_env) "
                "or a file (api_key_file) that holds it"
            )
        return data

    @field_validator("upstreams")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"upstream `{url}` is not an http(s) URL such as http://host:8000/v1")
        return [url.rstrip("/") for url in urls]

    @model_validator(mode="after")
    def _keys_from_outside(self) -> RemoteOptions:
        if self.api_key_env is not None and self.api_key_file is not None:
            raise ValueError("give at most one of `api_key_env` and `api_key_file`")
        return self

    def api_key(self) -> str | None:
        """The upstream's key, read from the environment or a file (never from models.toml itself)."""
        if self.api_key_env is not None:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ValueError(f"the environment variable `{self.api_key_env}` (api_key_env) is not set")
            return key
        if self.api_key_file is not None:
            with open(self.api_key_file) as file:
                return file.read().strip()
        return None
