"""An Ollama request as the chat (or completion) request it stands for: its messages (images as content
parts, the assistant's calls given ids that the tool messages after them answer), and its `options`,
`format` and `think` as sampling, output format and reasoning effort; streamed, whole or not."""

from __future__ import annotations

import json
from typing import Any

from modelport.protocol.sent_as import Message, SentAs
from modelport.server.ollama.ollama_request import ChatRequest, GenerateRequest, OllamaMessage, Options

# The chat's fields an Ollama request sends under other names: its options.
_FIELDS = {
    "max_tokens": "options.num_predict",
    "logprobs": "top_logprobs",  # a raw generate's (a completion's count of alternatives)
    "repetition_penalty": "options.repeat_penalty",
    **{name: f"options.{name}" for name in (
        "temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty", "frequency_penalty"
    )},
}  # fmt: skip
_FORMAT = ("format", "format")  # where an Ollama request holds the answer's format, and its schema
_IMAGE_KINDS = {"iVBOR": "image/png", "/9j/": "image/jpeg", "R0lG": "image/gif", "UklG": "image/webp"}


def messages(given: list[OllamaMessage]) -> list[dict[str, Any]]:
    """Ollama's messages as chat messages: images as content parts, the assistant's calls with ids (Ollama
    gives none) that the tool messages after them answer, in order."""
    out: list[dict[str, Any]] = []
    waiting: list[str] = []  # the ids of the last assistant's calls not yet answered
    for i, message in enumerate(given):
        if message.role == "assistant":
            said: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.thinking:
                said["reasoning_content"] = message.thinking
            if message.tool_calls:
                ids = [f"call_{i}_{j}" for j in range(len(message.tool_calls))]
                said["tool_calls"] = [
                    {
                        "id": id_,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": json.dumps(c.function.arguments)},
                    }
                    for id_, c in zip(ids, message.tool_calls, strict=True)
                ]
                waiting = ids
            out.append(said)
        elif message.role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": waiting.pop(0) if waiting else f"call_{i}",
                    "content": message.content,
                }
            )
        elif message.images:
            parts: list[dict[str, Any]] = (
                [{"type": "text", "text": message.content}] if message.content else []
            )
            parts += [
                {"type": "image_url", "image_url": {"url": _data_url(image)}} for image in message.images
            ]
            out.append({"role": message.role, "content": parts})
        else:
            out.append({"role": message.role, "content": message.content})
    return out


def chat_sent_as(given: list[OllamaMessage]) -> SentAs:
    """How a chat request named the parts of the chat request `messages(given)` makes: its messages one
    for one (one with images named whole, its text and images being the chat message's parts)."""
    origins = [Message(f"messages[{i}]", not message.images) for i, message in enumerate(given)]
    return SentAs(origins, _FIELDS, answer_format=_FORMAT)


def generate_sent_as(given: GenerateRequest) -> SentAs:
    """How a generate request named the parts of the chat request it makes: its system and its prompt."""
    made = [Message("system")] if given.system else []
    return SentAs([*made, Message("prompt")], _FIELDS, answer_format=_FORMAT)


# How a raw generate (a completion of its `prompt`, its `format` as vLLM's `guided_json`) named what it sent.
RAW_SENT_AS = SentAs([], {**_FIELDS, "guided_json": "format"}, answer_format=_FORMAT)


def _data_url(image: str) -> str:
    """An image as Ollama sends it (base64, no media type) as a data URL; one given as a data URL is kept."""
    if image.startswith("data:"):
        return image
    kind = next((k for prefix, k in _IMAGE_KINDS.items() if image.startswith(prefix)), "image/png")
    return f"data:{kind};base64,{image}"


def sampling(given: ChatRequest | GenerateRequest) -> dict[str, Any]:
    """What a request's `options`, `format` and `think` ask of the generation."""
    options = given.options or Options()
    # Streamed even when the answer is asked whole: it is read to its end here, and a stream tells when its
    # first token came, where Ollama's durations split (`prompt_eval_duration`, `eval_duration`).
    body: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
    same = {
        "temperature": options.temperature,
        "top_p": options.top_p,
        "top_k": options.top_k,
        "min_p": options.min_p,
        "seed": options.seed,
        "stop": options.stop,
        "presence_penalty": options.presence_penalty,
        "frequency_penalty": options.frequency_penalty,
        "repetition_penalty": options.repeat_penalty,
    }
    body.update({name: value for name, value in same.items() if value is not None})
    if options.num_predict is not None and options.num_predict > 0:
        body["max_tokens"] = options.num_predict
    if given.format == "json":
        body["response_format"] = {"type": "json_object"}
    elif isinstance(given.format, dict):
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "format", "schema": given.format},
        }
    if given.think is not None:
        think = given.think
        body["reasoning_effort"] = ("medium" if think else "none") if isinstance(think, bool) else think
    if given.logprobs:
        body.update(logprobs=True, top_logprobs=given.top_logprobs)
    return body
