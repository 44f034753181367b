"""Accumulating chunks into whole answers (and back), and keeping the best of `best_of` candidates."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from modelport.ids import new_id
from modelport.protocol.requests import ChatCompletionRequest, CompletionRequest
from modelport.service.planning import choices_per_input


def chat(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for delta_choice in chunk.get("choices") or []:
            index = delta_choice.get("index", 0)
            choice = choices.setdefault(
                index,
                {"index": index, "message": {"role": "assistant", "content": None}, "finish_reason": None},
            )
            message, delta = choice["message"], delta_choice.get("delta") or {}
            for key in ("content", "refusal", "reasoning_content"):
                if delta.get(key):
                    message[key] = (message.get(key) or "") + delta[key]
            for call in delta.get("tool_calls") or []:
                _merge_tool_call(message.setdefault("tool_calls", []), call)
            if delta.get("function_call"):
                function = message.setdefault("function_call", {"name": "", "arguments": ""})
                for key in ("name", "arguments"):
                    function[key] += delta["function_call"].get(key) or ""
            if delta_choice.get("finish_reason"):
                choice["finish_reason"] = delta_choice["finish_reason"]
            if delta_choice.get("logprobs"):
                logprobs = choice.setdefault("logprobs", {"content": []})
                logprobs["content"].extend(delta_choice["logprobs"].get("content") or [])
    for choice in choices.values():
        choice["finish_reason"] = choice["finish_reason"] or "stop"
    first = chunks[0] if chunks else {"id": new_id("chatcmpl"), "created": int(time.time())}
    return {
        **{k: first.get(k) for k in ("id", "created", "model", "system_fingerprint")},
        "object": "chat.completion",
        "choices": [choices[i] for i in sorted(choices)],
        "usage": usage,
    }


def _merge_tool_call(calls_so_far: list[dict[str, Any]], delta: dict[str, Any]) -> None:
    index = delta.get("index", len(calls_so_far))
    while len(calls_so_far) <= index:
        calls_so_far.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
    call = calls_so_far[index]
    call["id"] = delta.get("id") or call["id"]
    function = delta.get("function") or {}
    call["function"]["name"] += function.get("name") or ""
    call["function"]["arguments"] += function.get("arguments") or ""


def chat_to_chunks(whole: dict[str, Any]) -> list[dict[str, Any]]:
    chunks = []
    for choice in whole.get("choices", []):
        message = dict(choice.get("message") or {})
        if message.get("tool_calls"):
            message["tool_calls"] = [{**call, "index": i} for i, call in enumerate(message["tool_calls"])]
        chunks.append(
            {
                **{k: whole.get(k) for k in ("id", "created", "model", "system_fingerprint")},
                "object": "chat.completion.chunk",
                "choices": [
                    {
                        "index": choice.get("index", 0),
                        "delta": {k: v for k, v in message.items() if v is not None},
                        "finish_reason": choice.get("finish_reason") or "stop",
                        "logprobs": choice.get("logprobs"),
                    }
                ],
            }
        )
    if chunks and whole.get("usage"):
        chunks[-1]["usage"] = whole["usage"]
    return chunks


def completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for piece in chunk.get("choices") or []:
            index = piece.get("index", 0)
            choice = choices.setdefault(
                index, {"index": index, "text": "", "finish_reason": None, "logprobs": None}
            )
            choice["text"] += piece.get("text") or ""
            choice["finish_reason"] = piece.get("finish_reason") or choice["finish_reason"]
            if piece.get("logprobs"):
                merged = choice["logprobs"] = choice["logprobs"] or {}
                for key, values in piece["logprobs"].items():
                    merged.setdefault(key, []).extend(values or [])
    for choice in choices.values():
        choice["finish_reason"] = choice["finish_reason"] or "stop"
    first = chunks[0] if chunks else {"id": new_id("cmpl"), "created": int(time.time())}
    return {
        **{k: first.get(k) for k in ("id", "created", "model", "system_fingerprint")},
        "object": "text_completion",
        "choices": [choices[i] for i in sorted(choices)],
        "usage": usage,
    }


def best(
    whole: dict[str, Any],
    request: ChatCompletionRequest | CompletionRequest,
    token_logprobs: Callable[[dict[str, Any]], list[Any] | None],
) -> dict[str, Any]:
    """Of each input's `best_of` candidates, keep the `n` with the highest mean token log-probability."""
    width = choices_per_input(request)
    if width == request.n:
        return whole
    kept = []
    for start in range(0, len(whole["choices"]), width):
        group = whole["choices"][start : start + width]
        group.sort(key=lambda c: -_mean_logprob(token_logprobs(c)))
        kept.extend(group[: request.n])
    for i, choice in enumerate(kept):
        choice["index"] = i
        if request.logprobs is None or request.logprobs is False:
            choice["logprobs"] = None
    return {**whole, "choices": kept}


def _mean_logprob(values: list[Any] | None) -> float:
    numbers = [v if isinstance(v, float | int) else v.get("logprob") for v in values or []]
    numbers = [float(n) for n in numbers if n is not None]
    return sum(numbers) / len(numbers) if numbers else float("-inf")
