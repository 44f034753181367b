"""The Vector Stores API's objects as OpenAI shapes them, and the checks of what a request gives: attributes,
expiry, ranking options; a 404 for a store or file that is not the caller's."""

from __future__ import annotations

import time
from typing import Any

from openai.types import VectorStore
from openai.types.vector_stores import VectorStoreFile

from modelport.errors import InvalidRequestError, NotFoundError

STATUSES = ("in_progress", "completed", "failed", "cancelled")
DAY = 86400


def store_object(row: dict[str, Any], counts: dict[str, int]) -> VectorStore:
    expired = row["expires_at"] is not None and row["expires_at"] < time.time()
    status = "expired" if expired else "in_progress" if counts.get("in_progress") else "completed"
    return VectorStore.model_validate(
        {
            "id": row["id"],
            "object": "vector_store",
            "created_at": row["created"],
            "name": row["name"] or "",
            "description": row["description"],
            "usage_bytes": counts["usage_bytes"],
            "file_counts": file_counts(counts),
            "status": status,
            "expires_after": row["expires_after"],
            "expires_at": row["expires_at"],
            "last_active_at": row["last_active"],
            "metadata": row["metadata"],
            "embedding_model": row["model"],
        }
    )


def file_object(row: dict[str, Any]) -> VectorStoreFile:
    return VectorStoreFile.model_validate(
        {
            "id": row["id"],
            "object": "vector_store.file",
            "created_at": row["created"],
            "vector_store_id": row["vector_store_id"],
            "status": row["status"],
            "last_error": row["last_error"],
            "usage_bytes": row["usage_bytes"],
            "attributes": row["attributes"],
            "chunking_strategy": row["chunking"],
        }
    )


def file_counts(counts: dict[str, int]) -> dict[str, int]:
    shown = {status: counts.get(status, 0) for status in STATUSES}
    return {**shown, "total": sum(shown.values())}


def checked_attributes(given: Any, param: str) -> dict[str, Any]:
    """OpenAI's bounds on attributes: 16 keys of 64 characters; strings of 512, numbers or booleans."""
    if given is None:
        return {}
    if not isinstance(given, dict) or len(given) > 16:
        raise InvalidRequestError(f"{param} must be an object of at most 16 keys.", param=param)
    for key, value in given.items():
        if len(key) > 64:
            raise InvalidRequestError(f"{param}: the key {key[:20]!r}… is over 64 characters.", param=param)
        if not isinstance(value, (str, int, float, bool)) or (isinstance(value, str) and len(value) > 512):
            raise InvalidRequestError(
                f"{param}.{key} must be a string of at most 512 characters, a number or a boolean.",
                param=f"{param}.{key}",
            )
    return dict(given)


def checked_expires_after(given: dict[str, Any] | None) -> dict[str, Any] | None:
    if given is None:
        return None
    days = given.get("days")
    if given.get("anchor") != "last_active_at" or not isinstance(days, int) or not 1 <= days <= 365:
        raise InvalidRequestError(
            "expires_after must be {anchor: last_active_at, days: 1 to 365}.", param="expires_after"
        )
    return {"anchor": "last_active_at", "days": days}


def expiry(anchor: int, expires_after: dict[str, Any] | None) -> int | None:
    return anchor + expires_after["days"] * DAY if expires_after else None


def ranking(given: dict[str, Any] | None, param: str) -> tuple[float, tuple[float, float]]:
    """`score_threshold` (0 to 1) and the weights of the embedding and text rankings (`hybrid_search`);
    `ranker` names are accepted (there is one ranker)."""
    if given is not None and not isinstance(given, dict):
        raise InvalidRequestError(f"{param} must be an object.", param=param, code="invalid_type")
    given = given or {}
    threshold = given.get("score_threshold", 0.0)
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 <= threshold <= 1:
        raise InvalidRequestError(
            f"{param}.score_threshold must be from 0 to 1.", param=f"{param}.score_threshold"
        )
    hybrid_search = given.get("hybrid_search") or {}
    if not isinstance(hybrid_search, dict):
        raise InvalidRequestError(
            f"{param}.hybrid_search must be an object.", param=f"{param}.hybrid_search", code="invalid_type"
        )
    weights = (hybrid_search.get("embedding_weight", 1.0), hybrid_search.get("text_weight", 1.0))
    if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0 for w in weights):
        raise InvalidRequestError(
            f"{param}.hybrid_search weights must be numbers of 0 or more.", param=f"{param}.hybrid_search"
        )
    # Without a threshold, a result less similar than unrelated text (below 0) is still a result.
    floor = float(threshold) if threshold > 0 else -1.0
    return floor, (float(weights[0]), float(weights[1]))


def missing_store(store_id: str) -> NotFoundError:
    return NotFoundError(f"No vector store found with id '{store_id}'.", param="vector_store_id")


def missing_file(store_id: str, file_id: str) -> NotFoundError:
    return NotFoundError(f"No file '{file_id}' found in the vector store '{store_id}'.", param="file_id")
