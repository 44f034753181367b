"""Chat and legacy completions on local predictors, stage by stage: `planning` maps the request onto the
predictor (tools, output constraints, the model's own format and thinking, options), `decoding` makes the
predictor calls (each choice's text read by the model's format, `formats`), `framing` gives the chunks one id
and their usage, `accumulate` folds them into the whole answer when it is not streamed."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from openai.types import Completion
from openai.types.chat import ChatCompletion

from modelport.errors import InvalidRequestError
from modelport.predictors.chat_format import PLAIN
from modelport.predictors.contract import Predictor
from modelport.predictors.manager import LoadedModel
from modelport.protocol.answers import EventKind, Events, listed
from modelport.protocol.chunk_folds import ChatFold, CompletionFold
from modelport.protocol.event_kinds import CHAT_CHUNKS, COMPLETION_CHUNKS
from modelport.protocol.requests import ChatCompletionRequest, CompletionRequest
from modelport.service import calls
from modelport.service.generation import decoding, formats, planning, token_ids
from modelport.service.generation.formats import effort, reading
from modelport.service.generation.framing import framed, validate
from modelport.service.generation.logprobs import legacy_logprobs, scored_only, top_logprobs_cut
from modelport.service.generation.planning import TOOLS, choices_per_input
from modelport.service.generation.tools import plan as tool_plan
from modelport.service.generation.tools.render import render_history


async def chat(
    model: LoadedModel, predictor: Predictor, request: ChatCompletionRequest
) -> ChatCompletion | Events[ChatCompletion]:
    """Answer a chat completion request: a whole `ChatCompletion`, or its chunks as they come."""
    messages = [m.model_dump(exclude_none=True) for m in request.messages]
    form = predictor.chat_format
    if form.read_here and messages[-1]["role"] == "assistant":
        # The engine hands over such a model's raw text, and renders no continuation of a message.
        raise InvalidRequestError(
            f"The last message is the assistant's: continuing it is not supported for `{model.spec.id}`, "
            "whose answers are read in its own format (thinking, calls). End with a user or tool message.",
            param=f"messages[{len(messages) - 1}]",
        )
    plan = None
    shown = False  # the template shows the tools, and their calls and results, itself
    native = False  # the history's calls and results go to the template in the family's own syntax
    if not predictor.accepts(TOOLS) or predictor.tool_format:  # modelport runs tool calling
        plan = tool_plan.plan(request)
        shown = predictor.tool_format is not None and not (plan and plan.legacy)
        messages = render_history(messages, plan, native=shown)
        native = shown or plan is None
    messages = formats.history(form, messages, native)
    thinking = effort.plan(form, request.reasoning_effort, request.max_output_tokens)
    options, shape = planning.options(predictor, request, plan, shown, thinking)
    if request.use_beam_search:
        found = await decoding.beam_search(model, predictor, [messages], request, options)
        return validate(ChatCompletion, _folded(ChatFold(), found), predictor)
    read = None
    if plan is not None or form != PLAIN:
        legacy, thinks = bool(plan and plan.legacy), thinking is not None
        # modelport's own JSON answer leaves a family whose thinking the engine reads no room to think
        own_json = plan is not None and not shown and form.foreign_thinking

        def read(chunks: AsyncGenerator[dict[str, Any], None]) -> AsyncGenerator[dict[str, Any], None]:
            return reading.read(chunks, shape.read, shape.markers, legacy, thinks, own_json)

    chunks = decoding.choices(model, predictor, [messages], request, options, read)
    if request.logprobs:
        chunks = top_logprobs_cut(chunks, request.top_logprobs or 0)
    answer: ChatCompletion | Events[ChatCompletion] = await _delivered(
        chunks, model, predictor, request, _CHAT
    )
    return answer


async def completion(
    model: LoadedModel, predictor: Predictor, request: CompletionRequest
) -> Completion | Events[Completion]:
    """Answer a legacy completion request; a list of prompts gives `n` choices per prompt, in order."""
    prompts = token_ids.inputs(request.prompt)
    vocabulary = predictor.vocabulary
    token_ids.model_prompts(
        prompts, vocabulary.vocab_size if vocabulary else None, predictor.token_prompts, model.spec.id
    )
    scored = await decoding.scored_prompts(predictor, prompts, request)
    options, _ = planning.options(predictor, request)
    # The prompts' text is read only where the answer repeats it (echo) or a beam extends it.
    texts = (
        await token_ids.prompt_texts(prompts, vocabulary.detokenize if vocabulary else None)
        if request.echo or request.use_beam_search
        else ["" if isinstance(p, list) else p for p in prompts]
    )
    if request.use_beam_search:
        found = await decoding.beam_search(model, predictor, texts, request, options)
        return validate(Completion, _folded(CompletionFold(), found), predictor)
    width = choices_per_input(request)
    generated = (
        decoding.choices(model, predictor, prompts, request, options)
        if request.max_tokens != 0
        else listed(scored_only(scored or [], width))
    )
    # Rewritten only where there is something to rewrite (asked for, or ranking `best_of`): a layer per
    # token otherwise.
    rewrite = bool(request.echo or request.logprobs is not None or scored or width != request.n)
    chunks = (
        legacy_logprobs(generated, texts, width, bool(request.echo), request.logprobs or 0, scored)
        if rewrite
        else generated
    )
    answer: Completion | Events[Completion] = await _delivered(chunks, model, predictor, request, _COMPLETION)
    return answer


@dataclass(frozen=True)
class _AnswerShape:
    """A generation endpoint's answer: its events, its whole type, its ids' prefix, and each choice's token
    log-probabilities (to keep the best of `best_of`)."""

    events: EventKind[Any]
    whole: type[ChatCompletion] | type[Completion]
    prefix: str
    scores: Callable[[dict[str, Any]], list[Any] | None]


_CHAT = _AnswerShape(
    CHAT_CHUNKS, ChatCompletion, "chatcmpl", lambda c: (c.get("logprobs") or {}).get("content")
)
_COMPLETION = _AnswerShape(
    COMPLETION_CHUNKS, Completion, "cmpl", lambda c: (c.get("logprobs") or {}).get("token_logprobs")
)


async def _delivered(
    chunks: AsyncGenerator[dict[str, Any], None],
    model: LoadedModel,
    predictor: Predictor,
    request: ChatCompletionRequest | CompletionRequest,
    shape: _AnswerShape,
) -> Any:
    """The answer as asked: its framed chunks as they come (`stream`), or folded into the whole answer, of
    which the best `n` of `best_of` candidates are kept."""
    if request.stream:
        framed_chunks = framed(chunks, model.spec.id, request.include_usage, shape.prefix, predictor.name)
        return Events(await calls.eager(framed_chunks), shape.events)
    fold = shape.events.fold()
    async for chunk in framed(chunks, model.spec.id, True, shape.prefix, predictor.name):
        fold.add(chunk)
    return validate(shape.whole, decoding.best(fold.whole(), request, shape.scores), predictor)


def _folded(fold: ChatFold | CompletionFold, chunks: list[dict[str, object]]) -> dict[str, object]:
    for chunk in chunks:
        fold.add(chunk)
    return fold.whole()
