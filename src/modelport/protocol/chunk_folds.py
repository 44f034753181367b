"""The one accumulator of generation streams: chunks (or the pieces of one chunk) merged into what came
before, following openai-python's `accumulate_delta`, into the whole chat completion or legacy completion.

Every place that needs a stream's whole answer uses these folds: a non-streamed request, a stored
completion, the Responses API's output items, `/generate`'s frames, an upstream that streamed anyway.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from modelport.ids import new_id

# Keys whose value is replaced, never joined: they name a thing (list entries are found by `index`, unions
# told apart by `type`), and servers that repeat them in every delta (Ollama repeats `role`) must not make
# "assistantassistant" of them.
_NAMES = frozenset({"index", "type", "role", "id"})


def thinking_of(delta: dict[str, Any]) -> str | None:
    """The thinking a chat delta (or whole message) carries: `reasoning_content` (llama-server, DeepSeek, vLLM
    before 0.10, modelport) or `reasoning` (vLLM since, Ollama's OpenAI API, OpenRouter), as an upstream of
    either kind sends it."""
    text = delta.get("reasoning_content") or delta.get("reasoning")
    return text if isinstance(text, str) else None


def merge_delta(acc: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """Merge `delta` into `acc` (and return it): strings are joined, objects merged key by key, lists of
    objects with an `index` merged entry by entry, other lists extended; a value that names something
    (`_NAMES`), and any other value, replaces the one before; `None` changes nothing. As openai-python's
    `accumulate_delta`, but that list entries are found by their `index` rather than their position (the
    pieces of one chunk may begin at any tool call), and numbers are not added (no delta of ours has one
    to add)."""
    for key, value in delta.items():
        if value is None:
            continue
        current = acc.get(key)
        if current is None or key in _NAMES:
            acc[key] = _merged_list([], value) if _indexed(value) else copy.deepcopy(value)
        elif isinstance(current, str) and isinstance(value, str):
            acc[key] = current + value
        elif isinstance(current, dict) and isinstance(value, dict):
            merge_delta(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            if _indexed(value) or _indexed(current):
                _merged_list(current, value)
            else:
                current.extend(copy.deepcopy(value))
        else:
            acc[key] = copy.deepcopy(value)
    return acc


def _indexed(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(entry, dict) and "index" in entry for entry in value)


def _merged_list(acc: list[Any], delta: list[Any]) -> list[Any]:
    for entry in delta:
        found = next((e for e in acc if isinstance(e, dict) and e.get("index") == entry.get("index")), None)
        if found is None:
            acc.append(merge_delta({}, entry))
        else:
            merge_delta(found, entry)
    return acc


class _Fold:
    """Chunks folded, choice by choice, into the whole answer: its head (id, created, model) from the first
    chunk, each choice merged as its pieces come, the usage from the chunk that carries it."""

    object = ""
    prefix = ""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.choices: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        """Take one chunk."""
        if not self.head:
            self.head = {k: chunk.get(k) for k in ("id", "created", "model", "system_fingerprint")}
            if self.head["system_fingerprint"] is None:  # optional: absent rather than null
                del self.head["system_fingerprint"]
        self.usage = chunk.get("usage") or self.usage
        for piece in chunk.get("choices") or []:
            choice = self.choice(piece.get("index", 0))
            self._merge(choice, piece)
            choice["finish_reason"] = piece.get("finish_reason") or choice["finish_reason"]
            if piece.get("logprobs"):
                choice["logprobs"] = merge_delta(choice.get("logprobs") or {}, piece["logprobs"])

    def choice(self, index: int) -> dict[str, Any]:
        """The choice so far (made empty if it has not begun)."""
        if index not in self.choices:
            self.choices[index] = {"index": index, **self._empty(), "finish_reason": None}
        return self.choices[index]

    def whole(self) -> dict[str, Any]:
        """The whole answer so far; a choice that has not finished says `stop`."""
        choices = []
        for index in sorted(self.choices):
            choice = self._finished(copy.deepcopy(self.choices[index]))
            choice["finish_reason"] = choice["finish_reason"] or "stop"
            choices.append(choice)
        head = self.head or {"id": new_id(self.prefix), "created": int(time.time())}
        whole = {**head, "object": self.object, "choices": choices}
        return whole if self.usage is None else {**whole, "usage": self.usage}

    def _empty(self) -> dict[str, Any]:
        raise NotImplementedError

    def _merge(self, choice: dict[str, Any], piece: dict[str, Any]) -> None:
        raise NotImplementedError

    def _finished(self, choice: dict[str, Any]) -> dict[str, Any]:
        return choice


class ChatFold(_Fold):
    """Chat completion chunks folded into the whole `chat.completion` (a dict, as the wire carries it)."""

    object, prefix = "chat.completion", "chatcmpl"

    def _empty(self) -> dict[str, Any]:
        # What OpenAI's reference requires of a choice and its message, null or not; the rest (tool calls,
        # annotations, audio) only where an answer has them.
        return {"message": {"role": "assistant", "content": None, "refusal": None}, "logprobs": None}

    def _merge(self, choice: dict[str, Any], piece: dict[str, Any]) -> None:
        merge_delta(choice["message"], piece.get("delta") or {})

    def _finished(self, choice: dict[str, Any]) -> dict[str, Any]:
        calls = choice["message"].get("tool_calls")
        if calls:  # the pieces' `index` is not part of a whole call
            choice["message"]["tool_calls"] = [_whole_call(call) for call in calls]
        return choice


def _whole_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "id": call.get("id"),
        "type": call.get("type") or "function",
        "function": {"name": function.get("name") or "", "arguments": function.get("arguments") or ""},
    }


class CompletionFold(_Fold):
    """Legacy completion chunks folded into the whole `text_completion`."""

    object, prefix = "text_completion", "cmpl"

    def _empty(self) -> dict[str, Any]:
        return {"text": "", "logprobs": None}

    def _merge(self, choice: dict[str, Any], piece: dict[str, Any]) -> None:
        choice["text"] += piece.get("text") or ""


def chunks_of(whole: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole chat completion as the chunks that stream it (one per choice; usage on the last)."""
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
