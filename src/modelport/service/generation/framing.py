"""Framing a generation's chunks: one id and model id on all of them, usage in a final chunk; the event kinds
of chat and legacy completion streams (how they are typed in-process, and folded into the whole answer)."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Iterable
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from modelport import metrics
from modelport.errors import PredictorError
from modelport.ids import new_id
from modelport.predictors.contract import Predictor
from modelport.protocol.chunk_folds import chunks_of
from modelport.protocol.sdk_private import loosely

M = TypeVar("M", bound=BaseModel)


def as_chunks(item: Any, predictor: Predictor) -> Iterable[dict[str, Any]]:
    data = item.model_dump(exclude_unset=True) if isinstance(item, BaseModel) else item
    if not isinstance(data, dict):
        raise PredictorError(
            f"predictor `{predictor.name}` returned {type(item).__name__}; "
            "expected chunk dicts or openai chunk objects, or a whole completion"
        )
    # A whole legacy Completion has the same shape as a chunk; a whole ChatCompletion does not.
    if data.get("object") == "chat.completion":
        return chunks_of(data)
    return [data]


async def framed(
    chunks: AsyncGenerator[dict[str, Any], None],
    model_id: str,
    include_usage: bool,
    prefix: str,
    predictor: str,
) -> AsyncGenerator[dict[str, Any], None]:
    """One id of our own and our model id on every chunk (choices may come from several predictor calls);
    usage only in its own final chunk, when asked for. Each chunk must have a `choices` list (a breach is a
    500 naming the `predictor` that made it)."""
    request_id = new_id(prefix)
    usage: dict[str, Any] = {}
    try:
        async for chunk in chunks:
            if not isinstance(chunk.get("choices", []), list):
                raise PredictorError(f"predictor `{predictor}` returned a chunk without a `choices` list")
            chunk["id"], chunk["model"] = request_id, model_id
            chunk.setdefault("created", int(time.time()))
            if chunk.get("usage"):
                for key in ("prompt_tokens", "completion_tokens"):
                    usage[key] = usage.get(key, 0) + int(chunk["usage"].get(key, 0))
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                # Prompt tokens the engine found in its cache (a conversation's earlier turns), as OpenAI
                # reports them; of the first choice only, since the prompt is counted once.
                cached = (chunk["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")
                if cached is not None and "prompt_tokens_details" not in usage:
                    usage["prompt_tokens_details"] = {"cached_tokens": int(cached)}
                # Tokens spent thinking, of every choice (a model's format counts them as it reads them).
                thought = (chunk["usage"].get("completion_tokens_details") or {}).get("reasoning_tokens")
                if thought is not None:
                    details = usage.setdefault("completion_tokens_details", {"reasoning_tokens": 0})
                    details["reasoning_tokens"] += int(thought)
            chunk.pop("usage", None)
            if chunk.get("choices"):
                yield chunk
        if usage:
            metrics.count_tokens(model_id, usage)
        if include_usage and usage:
            yield {**chunk, "id": request_id, "model": model_id, "choices": [], "usage": usage}
    finally:
        await chunks.aclose()


def validate(cls: type[M], data: dict[str, Any], predictor: Predictor) -> M:
    try:
        return cls.model_validate(data)
    except ValidationError as error:
        # A scored prompt's first token has null log-probabilities, as OpenAI sends them, where the SDK's
        # type says floats: the SDK's own loose construction carries them.
        if all("logprobs" in e["loc"] and e["input"] is None for e in error.errors()):
            return cast(M, loosely(cls, data))
        raise PredictorError(
            f"predictor `{predictor.name}` returned a malformed {cls.__name__}: "
            f"{error.errors()[0]['loc']}: {error.errors()[0]['msg']}"
        ) from error
