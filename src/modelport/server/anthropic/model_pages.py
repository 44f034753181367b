"""`GET /v1/models` as Anthropic's SDKs list models (a request that carries `anthropic-version`), for the
`models` rows: imported where such a request comes, with Anthropic's types."""

from __future__ import annotations

import datetime

from anthropic.types import ModelInfo
from openai.types import Model
from pydantic import BaseModel


class ModelPage(BaseModel):
    """`GET /v1/models` as Anthropic lists models."""

    data: list[ModelInfo]
    has_more: bool
    first_id: str | None
    last_id: str | None


def models_shaped(operation: str, answer: object) -> object:
    """The `models` rows' answers as Anthropic's `ModelInfo` (for a request that carries
    `anthropic-version`); any other answer as it is."""
    if operation == "models.retrieve" and isinstance(answer, Model):
        return _model_info(answer)
    if operation == "models.list" and isinstance(answer, dict):
        infos = [_model_info(m) for m in answer.get("data", []) if isinstance(m, Model)]
        return ModelPage(
            data=infos,
            has_more=False,
            first_id=infos[0].id if infos else None,
            last_id=infos[-1].id if infos else None,
        )
    return answer


def _model_info(model: Model) -> ModelInfo:
    created = datetime.datetime.fromtimestamp(model.created, datetime.UTC)
    return ModelInfo(type="model", id=model.id, display_name=model.id, created_at=created, lifecycle="active")
