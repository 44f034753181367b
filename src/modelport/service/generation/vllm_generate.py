"""`POST /generate`, vLLM's original demo endpoint: a prompt (or messages, through the model's own chat
template) in, `{"text": [prompt + output, ...]}` out — whole, or as NUL-delimited frames each holding every
output so far (the completion stream folded as it goes). It runs on the legacy-completion path: its
sampling, `n`, `best_of` and beam search are that path's."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import anyio
from openai.types import Completion

from modelport.errors import InvalidRequestError
from modelport.predictors.contract import Capability, Predictor
from modelport.predictors.manager import ModelManager
from modelport.protocol.answers import EventKind, Events, listed
from modelport.protocol.chunk_folds import CompletionFold
from modelport.protocol.generate_request import VllmGenerateRequest
from modelport.protocol.requests import CompletionRequest
from modelport.protocol.validation import parse
from modelport.service.generation import formats
from modelport.service.generation.tools.render import render_history

Complete = Callable[[CompletionRequest], Awaitable[Completion | Events[Completion]]]
Frame = dict[str, Any]
# Each frame holds every output so far: the last one is the whole answer.
FRAMES: EventKind[Frame] = EventKind("generate", framing="nul")


async def generate(
    manager: ModelManager, complete: Complete, request: VllmGenerateRequest, default_model: str
) -> Frame | Events[Frame]:
    """`{"text": [...]}`, or (`stream`) such frames as the outputs grow."""
    if (request.prompt is None) == (request.messages is None):
        raise InvalidRequestError("Give exactly one of `prompt` and `messages`.", param="prompt")
    model_name = request.model or default_model
    stops: list[str] = []
    if request.messages is not None:
        prompt, stops = await _rendered(manager, model_name, request)
    else:
        assert request.prompt is not None
        prompt = request.prompt
    fields = request.model_dump(exclude={"model", "prompt", "messages", "stream", "stop"}, exclude_none=True)
    given = request.stop if isinstance(request.stop, list) else [request.stop] if request.stop else []
    if given:
        fields["stop"] = given
    # Beam search and best_of answer at the end: their one frame comes then.
    streamed = request.stream and not request.use_beam_search and (request.best_of or request.n) <= request.n
    completion = parse(
        CompletionRequest, {**fields, "model": model_name, "prompt": prompt, "stream": streamed}
    )
    if stops:  # the template's turn ends, beyond the four stops a request may give
        completion.stop = [*given, *stops]
    answer = await complete(completion)
    if isinstance(answer, Events):
        return Events(_frames(prompt, request.n, answer), FRAMES)
    texts = {"text": [prompt + choice.text for choice in sorted(answer.choices, key=lambda c: c.index)]}
    return Events(listed([texts]), FRAMES) if request.stream else texts


async def _rendered(
    manager: ModelManager, model_name: str, request: VllmGenerateRequest
) -> tuple[str, list[str]]:
    """The prompt the model's chat template makes of the messages, and the text that ends its turns."""
    model = await manager.get(model_name)
    predictor = model.predictor(Capability.CHAT)
    template = predictor.template if isinstance(predictor, Predictor) else None
    if not isinstance(predictor, Predictor) or template is None:
        raise InvalidRequestError(
            f"The model `{model.spec.id}` cannot show its chat template's prompt; send `prompt` instead.",
            param="messages",
        )
    # A template that renders tool calls itself gets them as they are; for any other they become text.
    sent = [m.model_dump(exclude_none=True) for m in request.messages or []]
    messages = formats.history(
        predictor.chat_format, render_history(sent, None, native=predictor.tool_format is not None)
    )
    prompt: str = await anyio.to_thread.run_sync(template.render, messages)
    return prompt, list(template.stops)


async def _frames(prompt: str, n: int, chunks: Events[Completion]) -> AsyncGenerator[Frame, None]:
    fold = CompletionFold()
    try:
        async for chunk in chunks.items:
            fold.add(chunk)
            if any(choice.get("text") for choice in chunk.get("choices") or []):
                texts = [prompt] * n
                for choice in fold.whole()["choices"]:
                    texts[choice["index"]] = prompt + choice["text"]
                yield {"text": texts}
    finally:
        await chunks.aclose()
