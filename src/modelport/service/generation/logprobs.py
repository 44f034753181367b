"""Legacy completions' log-probabilities: OpenAI's parallel lists, from chat's per-token form."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any


async def legacy_logprobs(
    chunks: AsyncGenerator[dict[str, Any], None],
    prompts: list[str],
    width: int,
    echo: bool,
    top: int,
    scored: list[list[Any]] | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """Rewrite per-token log-probabilities (`{"content": [{token, logprob, top_logprobs}]}`, as llama.cpp
    reports them) into `tokens`, `token_logprobs`, `top_logprobs` and `text_offset`; with `echo`, each
    choice starts with its prompt, and with `scored` prompts (`text`, `offset`, `logprob`, `top` per
    token) with their log-probabilities too; `top` alternatives a token at most, beside the sampled one.
    Choice i answers prompt i // width."""
    offsets: dict[int, int] = {}
    try:
        async for chunk in chunks:
            for choice in chunk.get("choices") or []:
                index = choice.get("index", 0)
                first = index not in offsets
                if first:
                    prompt = prompts[index // width]
                    offsets[index] = len(prompt) if echo else 0
                    if echo:
                        choice["text"] = prompt + (choice.get("text") or "")
                logprobs = choice.get("logprobs")
                if isinstance(logprobs, dict) and "content" in logprobs:
                    choice["logprobs"] = _parallel(logprobs["content"] or [], offsets, index, top)
                if first and scored is not None:
                    choice["logprobs"] = _prefixed(scored[index // width], choice.get("logprobs"))
            yield chunk
    finally:
        await chunks.aclose()


def scored_only(prompts: list[list[Any]], width: int) -> list[dict[str, Any]]:
    """The chunks of an answer of no tokens (`max_tokens: 0` with `echo`): the prompts alone, scored."""
    return [
        {
            "object": "text_completion",
            "choices": [{"index": i, "text": "", "finish_reason": "length", "logprobs": None}],
            "usage": {"prompt_tokens": len(prompts[i // width]), "completion_tokens": 0},
        }
        for i in range(len(prompts) * width)
    ]


def _prefixed(tokens: list[Any], generated: dict[str, list[Any]] | None) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {
        "tokens": [t.text for t in tokens],
        "token_logprobs": [t.logprob for t in tokens],
        "top_logprobs": [t.top for t in tokens],
        "text_offset": [t.offset for t in tokens],
    }
    for key, values in (generated or {}).items():
        out[key] = out.get(key, []) + values
    return out


def _parallel(
    tokens: list[dict[str, Any]], offsets: dict[int, int], index: int, top: int
) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for token in tokens:
        out["tokens"].append(token.get("token", ""))
        out["token_logprobs"].append(token.get("logprob"))
        alternatives = {t["token"]: t["logprob"] for t in (token.get("top_logprobs") or [])[:top]}
        # OpenAI always lists the sampled token
        alternatives.setdefault(token.get("token", ""), token.get("logprob"))
        out["top_logprobs"].append(alternatives)
        out["text_offset"].append(offsets[index])
        offsets[index] += len(token.get("token", ""))
    return out


async def top_logprobs_cut(
    chunks: AsyncGenerator[dict[str, Any], None], top: int
) -> AsyncGenerator[dict[str, Any], None]:
    """Chat chunks with each token's alternatives cut to the `top_logprobs` asked for (none for 0)."""
    try:
        async for chunk in chunks:
            for choice in chunk.get("choices") or []:
                for token in (choice.get("logprobs") or {}).get("content") or []:
                    if len(token.get("top_logprobs") or []) > top:
                        token["top_logprobs"] = token["top_logprobs"][:top]
            yield chunk
    finally:
        await chunks.aclose()
