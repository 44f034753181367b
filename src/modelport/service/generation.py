"""Chat and legacy completions: requests → predictor calls → `openai` chunks or whole responses."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator
from typing import Any

import anyio
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from modelport.errors import InvalidRequestError
from modelport.ids import new_id
from modelport.predictors.contract import Capability, Predictor
from modelport.predictors.manager import LoadedModel, ModelManager
from modelport.protocol.requests import ChatCompletionRequest, CompletionRequest
from modelport.service import accumulate, beam, calls, planning, relay, token_ids, tool_formats, tools
from modelport.service.framing import Chunks, as_chunks, checked, framed, validate
from modelport.service.logprobs import legacy_logprobs, scored_only
from modelport.service.planning import ALL, TOOLS, choices_per_input


async def chat(
    manager: ModelManager, request: ChatCompletionRequest
) -> ChatCompletion | Chunks[ChatCompletionChunk]:
    """Answer a chat completion request: a whole `ChatCompletion`, or a stream of chunks."""
    model = await manager.get(request.model)
    predictor = model.predictor(Capability.CHAT)
    if predictor.relay:
        return await relay.chat(model, predictor, request)
    messages = [m.model_dump(exclude_none=True) for m in request.messages]
    plan = native = None
    if not predictor.accepts(TOOLS) or predictor.tool_format:  # modelport runs tool calling
        plan = tools.plan(request)
        if predictor.tool_format and not (plan and plan.legacy):
            native = tool_formats.FORMATS[predictor.tool_format]
        messages = tools.render_history(messages, plan, native=native is not None)
        if native:
            messages = native.history(messages)
    options = planning.options(predictor, request, plan, native)
    if request.use_beam_search:
        found = await _beam_search(model, predictor, [messages], request, options)
        return validate(ChatCompletion, accumulate.chat(found), predictor)
    chunks = _choices(model, predictor, [messages], request, options)
    if plan is not None:
        form = native
        chunks = tools.parse_stream(
            chunks, plan, (lambda: tool_formats.NativeParser(form, plan.legacy)) if form else None
        )
    if request.stream:
        framed_chunks = framed(chunks, model.spec.id, request.include_usage, "chatcmpl")
        return Chunks(await calls.eager(checked(framed_chunks, predictor)), ChatCompletionChunk)
    collected = [c async for c in framed(chunks, model.spec.id, True, "chatcmpl")]
    whole = accumulate.best(
        accumulate.chat(collected), request, lambda c: (c.get("logprobs") or {}).get("content")
    )
    return validate(ChatCompletion, whole, predictor)


async def completion(manager: ModelManager, request: CompletionRequest) -> Completion | Chunks[Completion]:
    """Answer a legacy completion request; a list of prompts gives `n` choices per prompt, in order."""
    model = await manager.get(request.model)
    predictor = model.predictor(Capability.COMPLETION)
    if predictor.relay:
        return await relay.completion(model, predictor, request)
    prompts = token_ids.inputs(request.prompt)
    token_ids.model_prompts(
        prompts, getattr(predictor.fn, "vocab_size", None), predictor.token_prompts, model.spec.id
    )
    scored = await _scored_prompts(predictor, prompts, request)
    options = planning.options(predictor, request, None, None)
    # The prompts' text is read only where the answer repeats it (echo) or a beam extends it.
    texts = (
        await token_ids.prompt_texts(prompts, getattr(predictor.fn, "detokenize", None))
        if request.echo or request.use_beam_search
        else ["" if isinstance(p, list) else p for p in prompts]
    )
    if request.use_beam_search:
        found = await _beam_search(model, predictor, texts, request, options)
        return validate(Completion, accumulate.completion(found), predictor)
    width = choices_per_input(request)
    generated = (
        _choices(model, predictor, prompts, request, options)
        if request.max_tokens != 0
        else _listed(scored_only(scored or [], width))
    )
    chunks = legacy_logprobs(generated, texts, width, echo=bool(request.echo), scored=scored)
    if request.stream:
        framed_chunks = framed(chunks, model.spec.id, request.include_usage, "cmpl")
        return Chunks(await calls.eager(checked(framed_chunks, predictor)), Completion)
    collected = [c async for c in framed(chunks, model.spec.id, True, "cmpl")]
    whole = accumulate.best(
        accumulate.completion(collected), request, lambda c: (c.get("logprobs") or {}).get("token_logprobs")
    )
    return validate(Completion, whole, predictor)


async def _listed(chunks: list[dict[str, Any]]) -> AsyncGenerator[dict[str, Any], None]:
    for chunk in chunks:
        yield chunk


async def _scored_prompts(
    predictor: Predictor, prompts: list[token_ids.Input], request: CompletionRequest
) -> list[list[Any]] | None:
    """Each prompt's tokens with their log-probabilities, when `echo` and `logprobs` ask for them."""
    if request.max_tokens == 0 and not (request.echo and request.logprobs is not None):
        raise InvalidRequestError(
            "max_tokens 0 generates nothing: it is for scoring a prompt, with echo and logprobs.",
            param="max_tokens",
        )
    if not (request.echo and request.logprobs is not None):
        return None
    score = getattr(predictor.fn, "score", None)
    if score is None:
        raise InvalidRequestError(
            "echo with logprobs needs the prompt's log-probabilities, which this model does not report.",
            param="echo",
        )
    k = request.logprobs
    return [await anyio.to_thread.run_sync(score, prompt, k) for prompt in prompts]


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
    frame = {"id": new_id(prefix), "created": int(time.time()), "model": model.spec.id}
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


async def _choices(
    model: LoadedModel,
    predictor: Predictor,
    inputs: list[Any],
    request: ChatCompletionRequest | CompletionRequest,
    options: dict[str, Any],
) -> AsyncGenerator[dict[str, Any], None]:
    """Every choice of every input generated side by side, one predictor call each; input k owns indexes
    k*width … k*width+width-1. With a seed, choice j samples with seed+j: reproducible, yet distinct."""
    width = choices_per_input(request)
    streams = []
    for k, primary in enumerate(inputs):
        for j in range(width):
            own = options
            if j and request.seed is not None and ALL in options:
                own = {**options, ALL: {**options[ALL], "seed": request.seed + j}}
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
            for chunk in as_chunks(item, predictor):
                for choice in chunk.get("choices") or []:
                    choice["index"] = choice.get("index", 0) + index
                if chunk.get("usage") and not count_prompt:  # OpenAI counts a prompt once, whatever n is
                    chunk["usage"] = {**chunk["usage"], "prompt_tokens": 0}
                yield chunk
    finally:
        await stream.aclose()
