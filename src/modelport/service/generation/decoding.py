"""Decoding: the predictor calls a generation makes — every choice of every input side by side, one call
each, or beam search — and the prompts scored for `echo` with `logprobs`."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import anyio

from modelport.errors import InvalidRequestError
from modelport.ids import new_id
from modelport.predictors.abilities import PromptsScorer, ScoredToken
from modelport.predictors.contract import Predictor
from modelport.predictors.manager import LoadedModel
from modelport.protocol.requests import ChatCompletionRequest, CompletionRequest
from modelport.service import calls
from modelport.service.generation import beam, token_ids
from modelport.service.generation.framing import as_chunks
from modelport.service.generation.planning import ALL, choices_per_input


async def scored_prompts(
    predictor: Predictor, prompts: list[token_ids.Input], request: CompletionRequest
) -> list[list[ScoredToken]] | None:
    """Each prompt's tokens with their log-probabilities, when `echo` and `logprobs` ask for them."""
    if request.max_tokens == 0 and not (request.echo and request.logprobs is not None):
        raise InvalidRequestError(
            "max_tokens 0 generates nothing: it is for scoring a prompt, with echo and logprobs.",
            param="max_tokens",
        )
    if not (request.echo and request.logprobs is not None):
        return None
    scorer = predictor.scorer
    if scorer is None:
        raise InvalidRequestError(
            "echo with logprobs needs the prompt's log-probabilities, which this model does not report.",
            param="echo",
        )
    k = request.logprobs
    if len(prompts) > 1 and isinstance(scorer, PromptsScorer):
        return await anyio.to_thread.run_sync(scorer.score_all, prompts, k)
    return [await anyio.to_thread.run_sync(scorer.score, prompt, k) for prompt in prompts]


async def beam_search(
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
    turns = asyncio.Semaphore(model.slots.total)
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
                turns,
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


Read = Callable[[AsyncGenerator[dict[str, Any], None]], AsyncGenerator[dict[str, Any], None]]


def choices(
    model: LoadedModel,
    predictor: Predictor,
    inputs: list[Any],
    request: ChatCompletionRequest | CompletionRequest,
    options: dict[str, Any],
    read: Read | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """Every choice of every input generated side by side, one predictor call each; input k owns indexes
    k*width … k*width+width-1. With a seed, choice j samples with seed+j: reproducible, yet distinct. Each
    choice's chunks are `read` (by the model's format) on their own, so its usage counts its own thinking."""
    width = choices_per_input(request)
    streams = []
    for k, primary in enumerate(inputs):
        for j in range(width):
            own = options
            if j and request.seed is not None and ALL in options:
                own = {**options, ALL: {**options[ALL], "seed": request.seed + j}}
            stream = _one_choice(
                model, predictor, primary, own, k * width + j, count_prompt=j == 0, whole=not request.stream
            )
            streams.append(read(stream) if read is not None else stream)
    # No more at once than the model has slots: the rest would wait in its line, and a request of more
    # prompts × choices than slots and line together was refused by itself (a 429 on an idle server).
    return calls.merge(streams, at_once=model.slots.total)


async def _one_choice(
    model: LoadedModel,
    predictor: Predictor,
    primary: Any,
    options: dict[str, Any],
    index: int,
    count_prompt: bool,
    whole: bool,
) -> AsyncGenerator[dict[str, Any], None]:
    stream = calls.iterate(model, predictor, functools.partial(predictor, primary, options), whole)
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
