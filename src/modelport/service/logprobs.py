"""Legacy completions' log-probabilities: OpenAI's parallel lists, from chat's per-token form."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any


async def legacy_logprobs(
    chunks: AsyncGenerator[dict[str, Any], None], prompts: list[str], width: int, echo: bool
) -> AsyncGenerator[dict[str, Any], None]:
    """Rewrite per-token log-probabilities (`{"content": [{token, logprob, top_logprobs}]}`, as llama.cpp
    reports them) into `tokens`, `token_logprobs`, `top_logprobs` and `text_offset`; with `echo`, each
    choice starts with its prompt. Choice i answers prompt i // width."""
    offsets: dict[int, int] = {}
    try:
        async for chunk in chunks:
            for choice in chunk.get("choices") or []:
                index = choice.get("index", 0)
                if index not in offsets:
                    prompt = prompts[index // width]
                    offsets[index] = len(prompt) if echo else 0
                    if echo:
                        choice["text"] = prompt + (choice.get("text") or "")
                logprobs = choice.get("logprobs")
                if isinstance(logprobs, dict) and "content" in logprobs:
                    choice["logprobs"] = _parallel(logprobs["content"] or [], offsets, index)
            yield chunk
    finally:
        await chunks.aclose()


def _parallel(tokens: list[dict[str, Any]], offsets: dict[int, int], index: int) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for token in tokens:
        out["tokens"].append(token.get("token", ""))
        out["token_logprobs"].append(token.get("logprob"))
        top = {t["token"]: t["logprob"] for t in token.get("top_logprobs") or []}
        top.setdefault(token.get("token", ""), token.get("logprob"))  # OpenAI always lists the sampled token
        out["top_logprobs"].append(top)
        out["text_offset"].append(offsets[index])
        offsets[index] += len(token.get("token", ""))
    return out
