"""What servers add to OpenAI's chat types, read alike from a typed chunk or message and from its JSON: the
thinking a delta or message carries, which the `openai` types do not declare (they keep it as an extra)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def thinking(part: BaseModel | dict[str, Any]) -> str | None:
    """The thinking a chat delta (or message) carries: `reasoning_content` (llama-server, DeepSeek, vLLM
    before 0.10, modelport) or `reasoning` (vLLM since)."""
    fields = part if isinstance(part, dict) else part.model_extra or {}
    text = fields.get("reasoning_content") or fields.get("reasoning")
    return text if isinstance(text, str) else None
