"""The configured bounds on one request (`Settings.limits`), checked before any model is touched."""

from __future__ import annotations

from typing import Any

from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest, CompletionRequest, EmbeddingRequest
from modelport.service.generation import token_ids
from modelport.settings import Limits


def check_generation(request: ChatCompletionRequest | CompletionRequest, limits: Limits) -> None:
    """Messages, prompt sizes, `max_tokens` (which, when the request gives none, becomes the limit), `n`
    and `best_of`."""
    if isinstance(request, ChatCompletionRequest):
        _at_most(len(request.messages), limits.messages, "messages", "messages")
        for i, message in enumerate(request.messages):
            _chars(message.content, limits.input_chars, f"messages[{i}].content")
    else:
        prompts = token_ids.inputs(request.prompt)
        _at_most(len(prompts), limits.embedding_inputs, "prompts", "prompt")
        for prompt in prompts:
            _chars(prompt, limits.input_chars, "prompt")
    if limits.max_tokens is not None:
        if request.max_output_tokens is None:
            request.max_tokens = limits.max_tokens  # the bound is also the default: nothing runs unbounded
        else:
            param = (
                "max_tokens"
                if isinstance(request, CompletionRequest) or request.max_tokens
                else "max_completion_tokens"
            )
            _at_most(request.max_output_tokens, limits.max_tokens, "tokens", param)
    if request.max_output_tokens is None and limits.max_output_tokens is not None:
        request.max_tokens = limits.max_output_tokens  # the operator's default length; a request may ask more
    _at_most(request.n, limits.n, "choices", "n")
    if request.best_of is not None:
        _at_most(request.best_of, limits.n, "candidates", "best_of")


def check_embeddings(request: EmbeddingRequest, limits: Limits) -> None:
    """Texts per call and characters per text."""
    texts = token_ids.inputs(request.input)
    _at_most(len(texts), limits.embedding_inputs, "inputs", "input")
    for text in texts:
        _chars(text, limits.input_chars, "input")


def _chars(value: Any, limit: int, param: str) -> None:
    if isinstance(value, str):
        size = len(value)
    elif isinstance(value, list):
        size = sum(len(part.get("text") or "") for part in value if isinstance(part, dict))
    else:
        return
    _at_most(size, limit, "characters", param)


def _at_most(value: int, limit: int, what: str, param: str) -> None:
    if value > limit:
        raise InvalidRequestError(
            f"Invalid '{param}': {value} {what}, over this server's limit of {limit}.", param=param
        )
