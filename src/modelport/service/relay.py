"""Requests for relay predictors (remote models): the body goes on as the client sent it, the answer comes
back as the upstream gave it but for the model id, within the model's slots and limits."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVar, cast

from openai._models import construct_type
from openai.types import Completion, CreateEmbeddingResponse
from openai.types.audio import Transcription, TranscriptionVerbose
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel, ValidationError

from modelport import metrics
from modelport.errors import UpstreamError
from modelport.predictors.contract import Predictor
from modelport.predictors.manager import LoadedModel
from modelport.predictors.relay import BytesReply, EventReply, JsonReply, Reply, Upload
from modelport.protocol.requests import (
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    OpenAIRequest,
    SpeechRequest,
    TranscriptionRequest,
)
from modelport.service import accumulate, calls
from modelport.service.framing import Chunks

M = TypeVar("M", bound=BaseModel)


async def chat(
    model: LoadedModel, predictor: Predictor, request: ChatCompletionRequest
) -> ChatCompletion | Chunks[ChatCompletionChunk]:
    """A chat completion from the upstream: whole, or its chunks as they arrive."""
    answer: ChatCompletion | Chunks[ChatCompletionChunk] = await _generation(
        model, predictor, request, ChatCompletion, ChatCompletionChunk
    )
    return answer


async def completion(
    model: LoadedModel, predictor: Predictor, request: CompletionRequest
) -> Completion | Chunks[Completion]:
    """A legacy completion from the upstream."""
    answer: Completion | Chunks[Completion] = await _generation(
        model, predictor, request, Completion, Completion
    )
    return answer


async def embeddings(
    model: LoadedModel, predictor: Predictor, request: EmbeddingRequest
) -> CreateEmbeddingResponse:
    """Embeddings from the upstream, in the encoding the client asked it for."""
    reply = await _whole(model, predictor, request)
    data = _object(reply, model, "data")
    metrics.count_tokens(model.spec.id, data.get("usage") or {})
    return _typed(CreateEmbeddingResponse, data, reply.origin)


async def speech(model: LoadedModel, predictor: Predictor, request: SpeechRequest) -> Reply:
    """The upstream's audio (or its `speech.audio.*` events) as they arrive."""
    return await _started(model, predictor, request)


async def transcription(
    model: LoadedModel, predictor: Predictor, request: TranscriptionRequest, upload: Upload
) -> EventReply | Transcription | TranscriptionVerbose | str:
    """The upstream's transcript: typed JSON, text (srt, vtt, text), or its events."""
    reply = await _started(model, predictor, request, upload)
    if isinstance(reply, BytesReply):
        return b"".join([chunk async for chunk in reply.chunks]).decode("utf-8", "replace")
    if isinstance(reply, JsonReply):
        if request.response_format == "verbose_json":
            return _typed(TranscriptionVerbose, _object(reply, None, "text"), reply.origin)
        return _typed(Transcription, _object(reply, None, "text"), reply.origin)
    return reply


async def _generation(
    model: LoadedModel,
    predictor: Predictor,
    request: ChatCompletionRequest | CompletionRequest,
    whole_cls: type[Any],
    chunk_cls: type[Any],
) -> Any:
    reply = await _started(model, predictor, request)
    chat = whole_cls is ChatCompletion
    if isinstance(reply, BytesReply):
        await reply.chunks.aclose()
        raise UpstreamError(
            f"The upstream {reply.origin} answered with {reply.media_type}, not JSON or events."
        )
    if isinstance(reply, JsonReply):
        whole = _object(reply, model, "choices")
        metrics.count_tokens(model.spec.id, whole.get("usage") or {})
        if not request.stream:
            return _typed(whole_cls, whole, reply.origin)
        # An upstream that ignored `stream`: its whole answer as the chunks OpenAI would have sent.
        pieces = accumulate.chat_to_chunks(whole) if chat else [whole]
        return Chunks(_chunks(_listed(pieces), model, reply.origin), chunk_cls)
    chunks = _chunks(reply.events, model, reply.origin)
    if request.stream:
        return Chunks(chunks, chunk_cls)
    collected = [chunk async for chunk in chunks]
    whole = accumulate.chat(collected) if chat else accumulate.completion(collected)
    return _typed(whole_cls, whole, reply.origin)


async def _started(
    model: LoadedModel, predictor: Predictor, request: OpenAIRequest, upload: Upload | None = None
) -> Reply:
    """The upstream's reply, begun within one of the model's slots. A whole answer frees the slot at once;
    a relayed stream holds it until the stream ends or is closed."""
    body = request.model_dump(mode="json", exclude_unset=True)
    stack = AsyncExitStack()
    await stack.enter_async_context(model.slots.hold())
    try:
        with calls.predictor_errors(predictor):
            reply: Reply = await predictor.fn(body, upload)
    except BaseException:
        await stack.aclose()
        raise
    if isinstance(reply, JsonReply):
        await stack.aclose()
        return reply
    if isinstance(reply, EventReply):
        return EventReply(_releasing(reply.events, stack.aclose), reply.origin)
    return BytesReply(_releasing(reply.chunks, stack.aclose), reply.media_type, reply.origin)


async def _whole(model: LoadedModel, predictor: Predictor, request: OpenAIRequest) -> JsonReply:
    reply = await _started(model, predictor, request)
    if not isinstance(reply, JsonReply):
        await (reply.events if isinstance(reply, EventReply) else reply.chunks).aclose()
        raise UpstreamError(f"The upstream {reply.origin} answered with a stream where JSON was expected.")
    return reply


T = TypeVar("T")


async def _releasing(
    items: AsyncGenerator[T, None], release: Callable[[], Awaitable[Any]]
) -> AsyncGenerator[T, None]:
    try:
        async for item in items:
            yield item
    finally:
        await items.aclose()
        await release()


async def _listed(items: list[dict[str, Any]]) -> AsyncGenerator[dict[str, Any], None]:
    for item in items:
        yield item


async def _chunks(
    events: AsyncGenerator[dict[str, Any], None], model: LoadedModel, origin: str
) -> AsyncGenerator[dict[str, Any], None]:
    """The upstream's chunks with our model id."""
    try:
        async for event in events:
            if not isinstance(event.get("choices"), list):
                raise UpstreamError(f"The upstream {origin} sent a chunk without a `choices` list.")
            event["model"] = model.spec.id
            if event.get("usage"):
                metrics.count_tokens(model.spec.id, event["usage"])
            yield event
    finally:
        await events.aclose()


def _object(reply: JsonReply, model: LoadedModel | None, key: str) -> dict[str, Any]:
    """The answer's JSON object, with our model id; one without its main field (`choices`, `data`, `text`)
    is not an answer."""
    if not isinstance(reply.body, dict) or key not in reply.body:
        shown = json.dumps(reply.body)[:200]
        raise UpstreamError(f"The upstream {reply.origin} answered with JSON that has no `{key}`: {shown}")
    if model is not None:
        reply.body["model"] = model.spec.id
    return reply.body


def _typed(cls: type[M], data: dict[str, Any], origin: str) -> M:
    """The answer as the SDK's type; an answer that is not of that shape is the upstream's fault."""
    try:
        return cls.model_validate(data)
    except ValidationError as error:
        if any(e["type"] != "missing" and e["loc"][-1:] != ("embedding",) for e in error.errors()):
            first = error.errors()[0]
            raise UpstreamError(
                f"The upstream {origin} answered with a malformed {cls.__name__}: "
                f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
            ) from None
        # A few fields missing (servers leave out `created` and the like), or base64 embeddings: as the SDK.
        return cast(M, construct_type(type_=cls, value=data))
