"""Tiny real models built here, for testing user predictors end to end (each computes from its input)."""

from __future__ import annotations

import enum
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

import numpy as np

from modelport import Parameter


def trigram_embed(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
    """Hashed character-trigram embeddings, 64 dims, normalised: texts sharing trigrams are close."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for row, text in enumerate(texts):
        padded = f"  {text.lower()} "
        for i in range(len(padded) - 2):
            out[row, hashlib.blake2b(padded[i : i + 3].encode(), digest_size=2).digest()[0] % 64] += 1
    out /= np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-9, None)
    return out


def matryoshka_embed(
    texts: list[str], dims: Annotated[int, Parameter.EmbeddingDims(min=1, max=64)] = 64
) -> Annotated[np.ndarray, Parameter.Embedding]:
    """The trigram model, truncating itself when asked for fewer dimensions."""
    full = trigram_embed(texts)[:, :dims]
    return (full / np.clip(np.linalg.norm(full, axis=1, keepdims=True), 1e-9, None)).astype(np.float32)


class Pitch(enum.StrEnum):
    LOW = "low"
    HIGH = "high"


def tone_speech(
    text: str,
    voice: Annotated[Pitch, Parameter.AudioVoice],
    speed: Annotated[float, Parameter.AudioSpeed(min=0.25, max=4.0)] = 1.0,
) -> Annotated[np.ndarray, Parameter.Audio(sample_rate=8000)]:
    """One 80 ms tone per letter, pitched by the voice, shortened by speed: stereo, to test downmixing."""
    base = 220.0 if voice is Pitch.LOW else 880.0
    step = int(8000 * 0.08 / speed)
    t = np.arange(step) / 8000
    tones = [np.sin(2 * np.pi * (base + 10 * (ord(c) % 32)) * t) for c in text if c.isalpha()]
    mono = 0.3 * np.concatenate(tones or [np.zeros(step)])
    return np.stack([mono, mono], axis=1).astype(np.float32)


def loudness_transcriber(audio: Annotated[np.ndarray, Parameter.Audio(sample_rate=8000)]) -> str:
    """Describes what it hears: how long, and whether anything is there."""
    seconds = len(audio) / 8000
    heard = "sound" if float(np.abs(audio).max(initial=0)) > 0.05 else "silence"
    return f"{seconds:.1f} seconds of {heard}"


def reverse_chat(
    messages: list[dict[str, Any]],
    max_tokens: Annotated[int | None, Parameter.MaxOutputTokens] = None,
) -> Iterator[dict[str, Any]]:
    """Streams the last user message's words in reverse order (none when there is none), at most `max_tokens`
    of them."""
    text = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    reply = text.split()[::-1]
    cut = reply[:max_tokens] if max_tokens else reply
    base = {
        "id": "chatcmpl-reverse",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "x",
    }
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    for i, word in enumerate(cut):
        yield {
            **base,
            "choices": [{"index": 0, "delta": {"content": (" " if i else "") + word}, "finish_reason": None}],
        }
    finish = "length" if len(cut) < len(reply) else "stop"
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    yield {
        **base,
        "choices": [],
        "usage": {
            "prompt_tokens": len(text.split()),
            "completion_tokens": len(cut),
            "total_tokens": len(text.split()) + len(cut),
        },
    }


def _completion(name: str, content: str) -> dict[str, Any]:
    """A whole ChatCompletion saying `content`."""
    return {
        "id": f"chatcmpl-{name}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "x",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
    }


def count_chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Answers with a whole ChatCompletion: how many messages and words it was sent."""
    words = sum(len(str(m.get("content", "")).split()) for m in messages)
    return _completion("count", f"{len(messages)} messages, {words} words")


def seed_chat(
    messages: list[dict[str, Any]],
    options: Annotated[dict[str, Any] | None, Parameter.GenerationOptions] = None,
) -> dict[str, Any]:
    """Answers with the sampling seed it was handed (`none` without one): what the server decided each
    choice samples with."""
    seed = (options or {}).get("seed")
    return _completion("seed", "none" if seed is None else str(seed))


def letters_chat(
    messages: list[dict[str, Any]],
    options: Annotated[dict[str, Any] | None, Parameter.GenerationOptions] = None,
) -> dict[str, Any]:
    """Writes `a`, reporting `a`, `b`, `c`… as its most likely tokens at falling log-probabilities (as many
    as `top_logprobs` asks): a model beam search can run on."""
    tops = [
        {"token": letter, "logprob": -float(rank + 1), "bytes": [ord(letter)]}
        for rank, letter in enumerate("abcdefghijklmnop"[: (options or {}).get("top_logprobs") or 1])
    ]
    answer = _completion("letters", "a")
    answer["choices"][0]["logprobs"] = {"content": [{**tops[0], "top_logprobs": tops}]}
    answer["choices"][0]["finish_reason"] = "length"
    return answer


def wrong_dtype_embed(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
    """Breaks the contract at call time: float64."""
    return trigram_embed(texts).astype(np.float64)


def wrong_shape_embed(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
    """Breaks the contract at call time: one row too many."""
    return trigram_embed([*texts, "extra"])


def failing_chat(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Raises before producing anything."""
    raise RuntimeError("the weights are on fire")


VOICES = Literal["a", "b"]


def recall_chat(
    messages: list[dict[str, Any]],
    max_tokens: Annotated[int | None, Parameter.MaxOutputTokens] = None,
) -> Iterator[dict[str, Any]]:
    """Streams back the whole conversation it was given, one `role: content` line per message, a word at a
    time: what a turn of a stored conversation really reached the model with."""
    lines = [f"{m['role']}: {m.get('content') or ''}" for m in messages]
    words = " / ".join(lines).split(" ")
    cut = words[:max_tokens] if max_tokens else words
    base = {
        "id": "chatcmpl-recall",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "x",
    }
    for i, word in enumerate(cut):
        delta = {"content": (" " if i else "") + word, **({} if i else {"role": "assistant"})}
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    finish = "length" if len(cut) < len(words) else "stop"
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    yield {
        **base,
        "choices": [],
        "usage": {
            "prompt_tokens": len(words),
            "completion_tokens": len(cut),
            "total_tokens": len(words) + len(cut),
        },
    }


NARROW_WORDS = 60  # the context `narrow_recall_chat` reads, in words


def narrow_recall_chat(
    messages: list[dict[str, Any]],
    max_tokens: Annotated[int | None, Parameter.MaxOutputTokens] = None,
) -> Iterator[dict[str, Any]]:
    """`recall_chat` with a context of NARROW_WORDS words: a longer conversation is refused as llama.cpp
    refuses one past its context (`context_length_exceeded`)."""
    from modelport.errors import InvalidRequestError

    words = len(" / ".join(f"{m['role']}: {m.get('content') or ''}" for m in messages).split(" "))
    if words > NARROW_WORDS:
        raise InvalidRequestError(
            f"This model's maximum context length is {NARROW_WORDS} tokens. However, your messages resulted "
            f"in {words} tokens. Please reduce the length of the messages.",
            param="messages",
            code="context_length_exceeded",
        )
    return recall_chat(messages, max_tokens)


def recall_tool_chat(
    messages: list[dict[str, Any]],
    tools: Annotated[list[dict[str, Any]] | None, Parameter.ChatTools()] = None,
    max_tokens: Annotated[int | None, Parameter.MaxOutputTokens] = None,
) -> Iterator[dict[str, Any]]:
    """`recall_chat` that, given tools after a user's message, first calls the first of them with that
    message as its `text` (as `tool_chat`)."""
    return _calls_first(messages, tools, lambda: recall_chat(messages, max_tokens))


def narrow_recall_tool_chat(
    messages: list[dict[str, Any]],
    tools: Annotated[list[dict[str, Any]] | None, Parameter.ChatTools()] = None,
    max_tokens: Annotated[int | None, Parameter.MaxOutputTokens] = None,
) -> Iterator[dict[str, Any]]:
    """`recall_tool_chat` with a context of NARROW_WORDS words (as `narrow_recall_chat`)."""
    return _calls_first(messages, tools, lambda: narrow_recall_chat(messages, max_tokens))


def _calls_first(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    answer: Callable[[], Iterator[dict[str, Any]]],
) -> Iterator[dict[str, Any]]:
    """A call of the first tool, with the last user message as its `text`, where tools are given after a
    user's message; else `answer()`."""
    if tools and messages[-1]["role"] == "user":
        return _calling(messages, tools, lambda schema, said: {"text": said})
    return answer()


def counted_chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Answers `done`, after noting the last user message in the file named by $MODELPORT_TEST_CALLS (one
    line per call, so a test can count the calls a model really got) and a 20 ms pause."""
    text = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    with open(os.environ["MODELPORT_TEST_CALLS"], "a") as calls:
        calls.write(f"{text}\n")
    time.sleep(0.02)
    return {
        "id": "chatcmpl-counted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "x",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}
        ],
    }


STUCK = threading.Event()  # set to let `stuck_chat` go on


def stuck_chat(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Says one word, then waits (for `STUCK`, 60 s at most) before its last: an engine that stalls."""
    yield {
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "wait"}, "finish_reason": None}]
    }
    STUCK.wait(60)
    yield {"choices": [{"index": 0, "delta": {"content": "ed"}, "finish_reason": "stop"}]}


def ponder_chat(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A model that thinks: streams its thinking (`pondering` and the last user message's words, as
    `reasoning_content`), then answers with the thinking of earlier turns it was given back (each
    assistant message's `reasoning_content`), or `nothing given back`."""
    return _pondering(messages, "reasoning_content")


def ponder_as_vllm_chat(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """`ponder_chat` streaming its thinking as `reasoning`, as vLLM (since 0.10), Ollama's OpenAI API and
    OpenRouter name it: a relay of such an upstream."""
    return _pondering(messages, "reasoning")


def _pondering(messages: list[dict[str, Any]], field: str) -> Iterator[dict[str, Any]]:
    text = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    given = [
        str(m["reasoning_content"])
        for m in messages
        if m["role"] == "assistant" and m.get("reasoning_content")
    ]
    base = {
        "id": "chatcmpl-ponder",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "x",
    }
    thinking = ["pondering", *str(text).split()]
    answer = (" | ".join(given) or "nothing given back").split(" ")
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    for i, word in enumerate(thinking):
        delta = {field: (" " if i else "") + word}
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    for i, word in enumerate(answer):
        yield {
            **base,
            "choices": [{"index": 0, "delta": {"content": (" " if i else "") + word}, "finish_reason": None}],
        }
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    made = len(thinking) + len(answer)
    usage = {"prompt_tokens": len(str(text).split()), "completion_tokens": made, "total_tokens": made}
    yield {**base, "choices": [], "usage": usage}


def tool_chat(
    messages: list[dict[str, Any]],
    tools: Annotated[list[dict[str, Any]] | None, Parameter.ChatTools()] = None,
) -> Iterator[dict[str, Any]]:
    """A model that calls tools: given tools, it calls the first with the last user message as its `text`
    (the name in one chunk, the arguments in two); after a tool's result, it answers with that result."""
    return _calling(messages, tools, lambda schema, said: {"text": said})


def schema_tool_chat(
    messages: list[dict[str, Any]],
    tools: Annotated[list[dict[str, Any]] | None, Parameter.ChatTools()] = None,
) -> Iterator[dict[str, Any]]:
    """As `tool_chat`, with the arguments the first tool's schema requires: each required property the last
    user message (a list of it for an array, the first value of an enum)."""

    def arguments(schema: dict[str, Any], said: str) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        made: dict[str, Any] = {}
        for name in schema.get("required") or []:
            kind = properties.get(name) or {}
            listed = [said] if kind.get("type") == "array" else said
            made[name] = kind["enum"][0] if "enum" in kind else listed
        return made

    return _calling(messages, tools, arguments)


def _calling(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    arguments_of: Any,
) -> Iterator[dict[str, Any]]:
    base = {
        "id": "chatcmpl-tool",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "x",
    }
    last = messages[-1]
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    if tools and last["role"] != "tool":
        name = tools[0]["function"]["name"]
        said = str(last.get("content") or "")
        arguments = json.dumps(arguments_of(tools[0]["function"].get("parameters") or {}, said))
        head = {
            "index": 0,
            "id": "call_tiny",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        pieces = [head] + [
            {"index": 0, "function": {"arguments": part}} for part in (arguments[:5], arguments[5:])
        ]
        for piece in pieces:
            yield {**base, "choices": [{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}]}
        finish = "tool_calls"
    else:
        yield {
            **base,
            "choices": [
                {"index": 0, "delta": {"content": str(last.get("content") or "")}, "finish_reason": None}
            ],
        }
        finish = "stop"
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    yield {
        **base,
        "choices": [],
        "usage": {"prompt_tokens": len(messages), "completion_tokens": 1, "total_tokens": len(messages) + 1},
    }
