"""Chat and legacy completions: requests → predictor calls → `openai` chunks or whole responses."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any, TypeVar

from openai._models import construct_type
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel, ValidationError

from modelport import metrics
from modelport.errors import InvalidRequestError, PredictorError
from modelport.predictors.contract import Capability, Predictor
from modelport.predictors.manager import LoadedModel, ModelManager
from modelport.protocol.requests import ChatCompletionRequest, CompletionRequest
from modelport.service import beam, calls, grammar, tool_formats, tools
from modelport.service.logprobs import legacy_logprobs
from modelport.service.schema import check_enforceable

log = logging.getLogger("modelport.service")
M = TypeVar("M", bound=BaseModel)

_TOOLS = "openai.chat.completions.tools"
_FORMAT = "openai.chat.completions.response_format"
_ALL = "modelport.generation_options"
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
# Fields modelport honours itself, whatever the predictor.
_HANDLED_HERE = {"n", "best_of", "echo", "use_beam_search", "length_penalty", "early_stopping"}
_TOOL_FIELDS = {"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"}


async def chat(
    manager: ModelManager, request: ChatCompletionRequest
) -> ChatCompletion | AsyncGenerator[ChatCompletionChunk, None]:
    """Answer a chat completion request: a whole `ChatCompletion`, or a stream of chunks."""
    model = await manager.get(request.model)
    predictor = model.predictor(Capability.CHAT)
    messages = [m.model_dump(exclude_none=True) for m in request.messages]
    plan = native = None
    if not predictor.accepts(_TOOLS) or predictor.tool_format:  # modelport runs tool calling
        plan = tools.plan(request)
        if predictor.tool_format and not (plan and plan.legacy):
            native = tool_formats.FORMATS[predictor.tool_format]
        messages = tools.render_history(messages, plan, native=native is not None)
        if native:
            messages = native.history(messages)
    options = _options(predictor, request, plan, native)
    if request.use_beam_search:
        found = await _beam_search(model, predictor, [messages], request, options)
        return _validate(ChatCompletion, _accumulate_chat(found), predictor)
    chunks = _choices(model, predictor, [messages], request, options)
    if plan is not None:
        form = native
        chunks = tools.parse_stream(
            chunks, plan, (lambda: tool_formats.NativeParser(form, plan.legacy)) if form else None
        )
    if request.stream:
        return _typed(
            await calls.eager(_framed(chunks, model.spec.id, request.include_usage, "chatcmpl")),
            ChatCompletionChunk,
            predictor,
        )
    collected = [c async for c in _framed(chunks, model.spec.id, True, "chatcmpl")]
    whole = _best(_accumulate_chat(collected), request, lambda c: (c.get("logprobs") or {}).get("content"))
    return _validate(ChatCompletion, whole, predictor)


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
    if request.echo and request.logprobs is not None:
        raise InvalidRequestError(
            "echo with logprobs needs the prompt's log-probabilities, which this engine does not report.",
            param="echo",
        )
    options = _options(predictor, request, None, None)
    if request.use_beam_search:
        found = await _beam_search(model, predictor, [str(p) for p in prompts], request, options)
        return _validate(Completion, _accumulate_completion(found), predictor)
    chunks = legacy_logprobs(
        _choices(model, predictor, prompts, request, options),
        [str(p) for p in prompts],
        _width(request),
        echo=bool(request.echo),
    )
    if request.stream:
        return _typed(
            await calls.eager(_framed(chunks, model.spec.id, request.include_usage, "cmpl")),
            Completion,
            predictor,
        )
    collected = [c async for c in _framed(chunks, model.spec.id, True, "cmpl")]
    whole = _best(
        _accumulate_completion(collected), request, lambda c: (c.get("logprobs") or {}).get("token_logprobs")
    )
    return _validate(Completion, whole, predictor)


async def _beam_search(
    model: LoadedModel,
    predictor: Predictor,
    inputs: list[Any],
    request: ChatCompletionRequest | CompletionRequest,
    options: dict[str, Any],
) -> list[dict[str, Any]]:
    """Beam search for each input, as the chunks of a whole answer: `n` choices per input."""
    if request.stream:
        raise InvalidRequestError("use_beam_search cannot be used with stream.", param="use_beam_search")
    if request.logprobs:
        raise InvalidRequestError("use_beam_search does not report logprobs.", param="logprobs")
    chat = isinstance(request, ChatCompletionRequest)
    width = request.best_of or max(request.n, 2)
    stop = [request.stop] if isinstance(request.stop, str) else request.stop or []
    results = await asyncio.gather(
        *(
            beam.search(
                model,
                predictor,
                primary,
                chat,
                width,
                request.n,
                request.max_output_tokens or 16,
                request.length_penalty,
                request.early_stopping,
                stop,
                options,
            )
            for primary in inputs
        )
    )
    prefix = "chatcmpl" if chat else "cmpl"
    frame = {"id": f"{prefix}-{uuid.uuid4().hex}", "created": int(time.time()), "model": model.spec.id}
    chunks: list[dict[str, Any]] = []
    prompt_tokens = completion_tokens = 0
    for k, (beams, prompt) in enumerate(results):
        prompt_tokens += prompt
        for j, found in enumerate(beams):
            completion_tokens += found.tokens
            index = k * request.n + j
            if chat:
                piece: dict[str, Any] = {
                    "index": index,
                    "delta": {"role": "assistant", "content": found.text},
                }
            else:
                piece = {"index": index, "text": found.text}
            chunks.append({**frame, "choices": [{**piece, "finish_reason": found.finish_reason}]})
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    chunks.append({**frame, "choices": [], "usage": usage})
    return chunks


def _width(request: ChatCompletionRequest | CompletionRequest) -> int:
    """How many choices each input gets: `best_of` candidates, or `n`."""
    if request.best_of is not None:
        if request.best_of < request.n:
            raise InvalidRequestError("best_of must be at least n.", param="best_of")
        if request.stream and request.best_of > 1:
            raise InvalidRequestError("best_of cannot be used with stream.", param="best_of")
        return request.best_of
    return request.n


def _best(
    whole: dict[str, Any],
    request: ChatCompletionRequest | CompletionRequest,
    token_logprobs: Callable[[dict[str, Any]], list[Any] | None],
) -> dict[str, Any]:
    """Of each input's `best_of` candidates, keep the `n` with the highest mean token log-probability."""
    width = _width(request)
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


def _options(
    predictor: Predictor,
    request: ChatCompletionRequest | CompletionRequest,
    plan: tools.ToolPlan | None,
    native: tool_formats.ToolFormat | None,
) -> dict[str, Any]:
    """Map the request onto the predictor's annotated parameters, by denotation."""
    sent = request.model_dump(exclude_unset=True, exclude_none=True)
    for name in _HANDLED_HERE:
        sent.pop(name, None)
    if request.best_of is not None and request.best_of > request.n:  # ranking needs token log-probabilities
        sent["logprobs"] = sent.get("logprobs") or (True if isinstance(request, ChatCompletionRequest) else 1)
    if plan is not None or native is not None:
        for name in _TOOL_FIELDS:
            sent.pop(name, None)
    if plan is not None and native is not None:  # the template shows the tools; the grammar holds the format
        sent.pop("response_format", None)
        sent["tools"] = [{"type": "function", "function": tool} for tool in plan.tools]
        sent["grammar"] = native.grammar(plan)
    elif plan is not None:
        sent["response_format"] = tools.response_format(plan)
    _guided(sent)
    _check_format(sent.get("response_format"))
    if ("response_format" in sent or "grammar" in sent) and not (
        predictor.accepts(_FORMAT) or predictor.accepts(_ALL)
    ):
        raise InvalidRequestError(
            f"The model's predictor `{predictor.name}` cannot constrain its output "
            "(structured output, tool calls, guided decoding).",
            param="response_format",
        )
    if "grammar" in sent and not predictor.accepts(_ALL):
        raise InvalidRequestError(
            f"The model's predictor `{predictor.name}` takes no grammar.", param="guided_grammar"
        )
    by_denotation: dict[str, Any] = {}
    for denotation, name in _OPTION_FIELDS.items():
        if predictor.accepts(denotation) and name in sent:
            by_denotation[denotation] = sent.pop(name)
    if request.max_output_tokens is not None:
        if predictor.accepts("openai.chat.completions.max_output_tokens"):
            by_denotation["openai.chat.completions.max_output_tokens"] = request.max_output_tokens
        else:
            sent["max_tokens"] = request.max_output_tokens
    rest = {k: v for k, v in sent.items() if k not in _FRAMING}
    if predictor.accepts(_ALL):
        by_denotation[_ALL] = rest
    elif rest:
        log.info("predictor %s takes no %s; ignored", predictor.name, ", ".join(sorted(rest)))
    return by_denotation


def _guided(sent: dict[str, Any]) -> None:
    """vLLM's guided decoding extras, as a `response_format` or a GBNF `grammar`."""
    if "guided_json" in sent:
        schema = sent.pop("guided_json")
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError:
                raise InvalidRequestError("guided_json is not valid JSON.", param="guided_json") from None
        sent["response_format"] = {"type": "json_schema", "json_schema": {"name": "guided", "schema": schema}}
    if "guided_choice" in sent:
        sent["grammar"] = grammar.choice_grammar(sent.pop("guided_choice"))
    if "guided_regex" in sent:
        sent["grammar"] = grammar.regex_grammar(sent.pop("guided_regex"))
    if "guided_grammar" in sent:
        sent["grammar"] = sent.pop("guided_grammar")


def _check_format(response_format: dict[str, Any] | None) -> None:
    if not response_format or response_format.get("type") != "json_schema":
        return
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise InvalidRequestError("response_format.json_schema must be an object.", param="response_format")
    if "schema" in spec:
        check_enforceable(spec["schema"], "response_format.json_schema.schema", "response_format")


async def _choices(
    model: LoadedModel,
    predictor: Predictor,
    inputs: list[Any],
    request: ChatCompletionRequest | CompletionRequest,
    options: dict[str, Any],
) -> AsyncGenerator[dict[str, Any], None]:
    """Every choice of every input generated side by side, one predictor call each; input k owns indexes
    k*width … k*width+width-1. With a seed, choice j samples with seed+j: reproducible, yet distinct."""
    width = _width(request)
    streams = []
    for k, primary in enumerate(inputs):
        for j in range(width):
            own = options
            if j and request.seed is not None and _ALL in options:
                own = {**options, _ALL: {**options[_ALL], "seed": request.seed + j}}
            streams.append(_one_choice(model, predictor, primary, own, k * width + j, count_prompt=j == 0))
    merged = calls.merge(streams)
    try:
        async for chunk in merged:
            yield chunk
    finally:
        await merged.aclose()


async def _one_choice(
    model: LoadedModel,
    predictor: Predictor,
    primary: Any,
    options: dict[str, Any],
    index: int,
    count_prompt: bool,
) -> AsyncGenerator[dict[str, Any], None]:
    stream = calls.iterate(model, predictor, functools.partial(predictor, primary, options))
    try:
        async for item in stream:
            for chunk in _as_chunks(item, predictor):
                for choice in chunk.get("choices") or []:
                    choice["index"] = choice.get("index", 0) + index
                if chunk.get("usage") and not count_prompt:  # OpenAI counts a prompt once, whatever n is
                    chunk["usage"] = {**chunk["usage"], "prompt_tokens": 0}
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
    chunks: AsyncGenerator[dict[str, Any], None], model_id: str, include_usage: bool, prefix: str
) -> AsyncGenerator[dict[str, Any], None]:
    """One id of our own and our model id on every chunk (choices may come from several predictor calls);
    usage only in its own final chunk, when asked for."""
    request_id = f"{prefix}-{uuid.uuid4().hex}"
    usage: dict[str, Any] = {}
    try:
        async for chunk in chunks:
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
            chunk.pop("usage", None)
            if chunk.get("choices"):
                yield chunk
        if usage:
            metrics.count_tokens(model_id, usage)
        if include_usage and usage:
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
            yield _chunk(cls, chunk)
    finally:
        await chunks.aclose()


def _chunk(cls: type[Any], chunk: dict[str, Any]) -> Any:
    """One typed chunk. pydantic-core validates one in microseconds where `construct_type` (the SDK's way,
    which tolerates anything) takes ~20× longer, which a 2-core machine pays out of its decode rate. A
    legacy completion chunk's `finish_reason` is null until the end, which the strict type refuses: it is
    validated as "length" and set back."""
    open_choices = [
        c
        for c in chunk["choices"]
        if cls is Completion and isinstance(c, dict) and c.get("finish_reason") is None
    ]
    for choice in open_choices:
        choice["finish_reason"] = "length"
    try:
        typed = cls.model_validate(chunk)
    except ValidationError:
        typed = None
    for choice in open_choices:
        choice["finish_reason"] = None
    if typed is None:
        return construct_type(type_=cls, value=chunk)
    for model, raw in zip(typed.choices, chunk["choices"], strict=True):
        if raw.get("finish_reason") is None:
            model.finish_reason = None
    return typed


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
