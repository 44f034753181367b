"""Request bodies of the Vector Stores API. Chunking strategies, filters and attributes are checked by the
service, which knows the store's embedding model and names the part at fault."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from modelport.protocol.requests import Metadata

Attributes = dict[str, str | float | bool] | None


class VectorStoreCreate(BaseModel):
    """`POST /v1/vector_stores`. Llama Stack's clients add three fields: `embedding_model` chooses the
    store's embedding model (the server's default otherwise), `embedding_dimension` is checked against it,
    and `provider_id`, which names a vector backend there, is accepted and ignored: here every store lives in
    the server's one database."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=512)
    description: str | None = Field(default=None, max_length=512)
    file_ids: list[str] | None = Field(default=None, max_length=500)
    chunking_strategy: dict[str, Any] | None = None
    expires_after: dict[str, Any] | None = None
    metadata: Metadata = None
    embedding_model: str | None = None
    embedding_dimension: int | None = Field(default=None, ge=1)
    provider_id: str | None = None


class VectorStoreUpdate(BaseModel):
    """`POST /v1/vector_stores/{id}`."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=512)
    expires_after: dict[str, Any] | None = None
    metadata: Metadata = None


class VectorStoreFileCreate(BaseModel):
    """`POST /v1/vector_stores/{id}/files`."""

    model_config = ConfigDict(extra="forbid")

    file_id: str
    attributes: Attributes = None
    chunking_strategy: dict[str, Any] | None = None


class VectorStoreFileUpdate(BaseModel):
    """`POST /v1/vector_stores/{id}/files/{file_id}`."""

    model_config = ConfigDict(extra="forbid")

    attributes: Attributes


class FileBatchCreate(BaseModel):
    """`POST /v1/vector_stores/{id}/file_batches`: `file_ids` sharing `attributes` and a chunking
    strategy, or `files` each with its own."""

    model_config = ConfigDict(extra="forbid")

    file_ids: list[str] | None = Field(default=None, max_length=2000)
    files: list[dict[str, Any]] | None = Field(default=None, max_length=2000)
    attributes: Attributes = None
    chunking_strategy: dict[str, Any] | None = None


class VectorStoreSearch(BaseModel):
    """`POST /v1/vector_stores/{id}/search`."""

    model_config = ConfigDict(extra="forbid")

    query: str | list[str]
    filters: dict[str, Any] | None = None
    max_num_results: int = Field(default=10, ge=1, le=50)
    ranking_options: dict[str, Any] | None = None
    rewrite_query: bool = False
