"""Chat and legacy completions: requests → predictor calls → `openai` chunks or whole responses."""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Iterable
from typing import Any, TypeVar

from openai._models import construct_type
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel, ValidationError

from modelport.errors import InvalidRequestError, PredictorError
from modelport.predictors.contract import Capability, Predictor
from modelport.predictors.manager import LoadedModel, ModelManager
from modelport.protocol.requests import ChatCompletionRequest, CompletionRequest
from modelport.service import calls

log = logging.getLogger("modelport.service")
M = TypeVar("M", bound=BaseModel)

_OPTION_FIELDS = {
    "openai.chat.completions.temperature": "temperature",
    "openai.chat.completions.top_p": "top_p",
    "openai.chat.completions.presence_penalty": "presence_penalty",
    "openai.chat.completions.frequency_penalty": "frequency_penalty",
    "openai.chat.completions.response_format": "response_format",
    "openai.chat.completions.tools": "tools",
}
# Fields that are the request's framing, not options for the model.
_FRAMING = {"model", "messages", "prompt", "stream", "stream_options", "max_completion_tokens"}


async def chat(
    manager: ModelManager, request: ChatCompletionRequest
) -> ChatCompletion | AsyncGenerator[ChatCompletionChunk, None]:
    """Answer a chat completion request: a whole `ChatCompletion`, or a stream of chunks."""
    model = await manager.get(request.model)
    predictor = model.predictor(Capability.CHAT)
    messages = [m.model_dump(exclude_none=True) for m in request.messages]
    options = _options(predictor, request)
    chunks = _chunks(model, predictor, [messages], request.n, options)
    if request.stream:
        return _typed(
            await calls.eager(_framed(chunks, model.spec.id, request.include_usage)),
            ChatCompletionChunk,
            predictor,
        )
    collected = [c async for c in _framed(chunks, model.spec.id, include_usage=True)]
    return _validate(ChatCompletion, _accumulate_chat(collected), predictor)


async def completion(
    manager: ModelManager, request: CompletionRequest
) -> Completion | AsyncGenerator[Completion, None]:
    """Answer a legacy completion request; a list of prompts gives `n` choices per prompt, in order."""
    model = await manager.get(request.model)
    predictor = model.predictor(Capability.COMPLETION)
    prompts = [request.prompt] if isinstance(request.prompt, str) else request.prompt
    if not all(isinstance(p, str) for p in prompts):
        raise InvalidRequestError(
            "Token-array prompts are not supported; send the prompt as text.", param="prompt"
        )
    options = _options(predictor, request)
    chunks = _chunks(model, predictor, prompts, request.n, options)
    if request.stream:
        return _typed(
            await calls.eager(_framed(chunks, model.spec.id, request.include_usage)), Completion, predictor
        )
    collected = [c async for c in _framed(chunks, model.spec.id, include_usage=True)]
    return _validate(Completion, _accumulate_completion(collected), predictor)


def _options(predictor: Predictor, request: ChatCompletionRequest | CompletionRequest) -> dict[str, Any]:
    """Map the request onto the predictor's annotated parameters, by denotation."""
    sent = request.model_dump(exclude_unset=True, exclude_none=True)
    by_denotation: dict[str, Any] = {}
    for denotation, field in _OPTION_FIELDS.items():
        if predictor.accepts(denotation) and field in sent:
            by_denotation[denotation] = sent.pop(field)
    if request.max_output_tokens is not None:
        if predictor.accepts("openai.chat.completions.max_output_tokens"):
            by_denotation["openai.chat.completions.max_output_tokens"] = request.max_output_tokens
        else:
            sent["max_tokens"] = request.max_output_tokens
    rest = {k: v for k, v in sent.items() if k not in _FRAMING}
    if predictor.accepts("modelport.generation_options"):
        by_denotation["modelport.generation_options"] = rest
    elif rest:
        log.info("predictor %s takes no %s; ignored", predictor.name, ", ".join(sorted(rest)))
    return by_denotation


async def _chunks(
    model: LoadedModel,
    predictor: Predictor,
    inputs: list[Any],
    n: int,
    options: dict[str, Any],
) -> AsyncGenerator[dict[str, Any], None]:
    """Chunk dicts for every input, choice indexes offset so input k owns indexes k*n … k*n+n-1."""
    for k, primary in enumerate(inputs):
        stream = calls.iterate(model, predictor, functools.partial(predictor, primary, options))
        try:
            async for item in stream:
                for chunk in _as_chunks(item, predictor):
                    if k:
                        for choice in chunk.get("choices") or []:
                            choice["index"] = choice.get("index", 0) + k * n
                    yield chunk
        finally:
            await stream.aclose()


def _as_chunks(item: Any, predictor: Predictor) -> Iterable[dict[str, Any]]:
    data = item.model_dump(exclude_unset=True) if isinstance(item, BaseModel) else item
    if not isinstance(data, dict):
        raise PredictorError(
            f"predictor `{predictor.name}` returned {type(item).__name__}; "
            "expected chunk dicts or openai chunk objects, or a whole completion"
        )
    # A whole legacy Completion has the same shape as a chunk; a whole ChatCompletion does not.
    if data.get("object") == "chat.completion":
        return _whole_chat_to_chunks(data)
    return [data]


async def _framed(
    chunks: AsyncGenerator[dict[str, Any], None], model_id: str, include_usage: bool
) -> AsyncGenerator[dict[str, Any], None]:
    """One id and our model id on every chunk; usage only in its own final chunk, when asked for."""
    request_id: str | None = None
    usage: dict[str, int] = {}
    try:
        async for chunk in chunks:
            request_id = request_id or str(chunk.get("id") or f"cmpl-{uuid.uuid4().hex}")
            chunk["id"], chunk["model"] = request_id, model_id
            chunk.setdefault("created", int(time.time()))
            if chunk.get("usage"):
                for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                    usage[key] = usage.get(key, 0) + int(chunk["usage"].get(key, 0))
            chunk.pop("usage", None)
            if chunk.get("choices"):
                yield chunk
        if include_usage and usage and request_id:
            yield {**chunk, "id": request_id, "model": model_id, "choices": [], "usage": usage}
    finally:
        await chunks.aclose()


async def _typed(
    chunks: AsyncGenerator[dict[str, Any], None], cls: type[Any], predictor: Predictor
) -> AsyncGenerator[Any, None]:
    """Chunks built as the SDK builds streamed chunks: without validation, since OpenAI's own stream
    chunks break the strict types (a legacy completion chunk's `finish_reason` is null until the end)."""
    try:
        async for chunk in chunks:
            if not isinstance(chunk.get("choices"), list):
                raise PredictorError(
                    f"predictor `{predictor.name}` returned a chunk without a `choices` list"
                )
            yield construct_type(type_=cls, value=chunk)
    finally:
        await chunks.aclose()


def _validate(cls: type[M], data: dict[str, Any], predictor: Predictor) -> M:
    try:
        return cls.model_validate(data)
    except ValidationError as error:
        raise PredictorError(
            f"predictor `{predictor.name}` returned a malformed {cls.__name__}: "
            f"{error.errors()[0]['loc']}: {error.errors()[0]['msg']}"
        ) from error


def _accumulate_chat(chunks: list[dict[str, Any]]) -> dict[str, Any]:
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
            if delta_choice.get("finish_reason"):
                choice["finish_reason"] = delta_choice["finish_reason"]
            if delta_choice.get("logprobs"):
                logprobs = choice.setdefault("logprobs", {"content": []})
                logprobs["content"].extend(delta_choice["logprobs"].get("content") or [])
    for choice in choices.values():
        choice["finish_reason"] = choice["finish_reason"] or "stop"
    first = chunks[0] if chunks else {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time())}
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


def _whole_chat_to_chunks(whole: dict[str, Any]) -> list[dict[str, Any]]:
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


def _accumulate_completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
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
    first = chunks[0] if chunks else {"id": f"cmpl-{uuid.uuid4().hex}", "created": int(time.time())}
    return {
        **{k: first.get(k) for k in ("id", "created", "model", "system_fingerprint")},
        "object": "text_completion",
        "choices": [choices[i] for i in sorted(choices)],
        "usage": usage,
    }
