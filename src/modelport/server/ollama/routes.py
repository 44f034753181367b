"""Ollama's routes: each translates its request, calls the row it stands for as every face does, and
renders the answer in Ollama's shapes: one JSON object, or (by default) NDJSON, one object a line, the last
with `done: true`, the stop reason and the counts (durations in nanoseconds, as Ollama gives them)."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import AsyncGenerator
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from ollama import (
    ChatResponse,
    EmbeddingsResponse,
    EmbedResponse,
    GenerateResponse,
    ListResponse,
    Message,
    ProcessResponse,
    ShowResponse,
)
from ollama._types import ModelDetails
from openai.types import Completion, CreateEmbeddingResponse, Model
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ByteSize

from modelport.errors import InvalidRequestError, ModelportError
from modelport.protocol.answers import Events
from modelport.server.ollama.ollama_request import (
    ChatMessage,
    ChatRequest,
    EmbeddingsRequest,
    EmbedRequest,
    GenerateRequest,
    ModelRequest,
    Options,
    keep_alive_seconds,
)
from modelport.service import Service
from modelport.service.operation_table import OPERATIONS

router = APIRouter()
CHAT = OPERATIONS.by_name("chat.completions.create")
COMPLETION = OPERATIONS.by_name("completions.create")
EMBEDDING = OPERATIONS.by_name("embeddings.create")
# The Ollama API version whose shapes these are (clients check it before using newer fields).
VERSION = "0.13.0"
NDJSON = "application/x-ndjson"
_IMAGE_KINDS = {"iVBOR": "image/png", "/9j/": "image/jpeg", "R0lG": "image/gif", "UklG": "image/webp"}


class TaggedModel(ListResponse.Model):
    """A model of `/api/tags`: Ollama's, with the `name` its apps read beside `model`."""

    name: str


class RunningModel(ProcessResponse.Model):
    """A model of `/api/ps`."""

    name: str


class Tags(BaseModel):
    """`/api/tags` (Ollama's `ListResponse`, its models with their `name`)."""

    models: list[TaggedModel]


class Running(BaseModel):
    """`/api/ps` (Ollama's `ProcessResponse`, its models with their `name`)."""

    models: list[RunningModel]


class Version(BaseModel):
    version: str


@router.post("/chat", response_class=Response, responses={200: {"model": ChatResponse}}, tags=["Ollama"])
async def chat(request: Request, given: ChatRequest) -> Response:
    """A chat turn: the assistant's message, streamed (NDJSON) unless `stream` is false."""
    service: Service = request.app.state.service
    if not given.messages:
        return _json(await _load(service, given.model, given.keep_alive, ChatResponse, message=_empty()))
    body = {"model": given.model, "messages": _messages(given.messages), **_sampling(given)}
    if given.tools:
        body["tools"] = given.tools
    answer = await CHAT.invoke(service, {}, body=body)
    if isinstance(answer, Events):
        return _streamed(_chat_lines(answer, given, service))
    assert isinstance(answer, ChatCompletion)
    said = answer.choices[0].message
    message = Message(
        role="assistant",
        content=said.content or "",
        thinking=getattr(said, "reasoning_content", None) or None,
        tool_calls=[
            _tool_call(c.function.name, c.function.arguments)
            for c in said.tool_calls or []
            if c.type == "function"
        ]
        or None,
    )
    await _kept(service, given.model, given.keep_alive)
    done = _done(answer.model, answer.choices[0].finish_reason, answer.usage, time.monotonic())
    return _json(ChatResponse(message=message, **done))


@router.post(
    "/generate", response_class=Response, responses={200: {"model": GenerateResponse}}, tags=["Ollama"]
)
async def generate(request: Request, given: GenerateRequest) -> Response:
    """A completion of `prompt` (under the model's template, unless `raw`): streamed unless `stream` is
    false."""
    service: Service = request.app.state.service
    if not given.prompt and not given.images:
        return _json(await _load(service, given.model, given.keep_alive, GenerateResponse, response=""))
    sampling = _sampling(given)
    if given.raw or given.suffix is not None:  # the prompt as it is (and what follows it): a completion
        sampling.pop("reasoning_effort", None)
        sampling.pop("response_format", None)
        body = {"model": given.model, "prompt": given.prompt, "suffix": given.suffix, **sampling}
        answer = await COMPLETION.invoke(service, {}, body={k: v for k, v in body.items() if v is not None})
    else:
        turn = ChatMessage(role="user", content=given.prompt, images=given.images)
        system = [ChatMessage(role="system", content=given.system)] if given.system else []
        body = {"model": given.model, "messages": _messages([*system, turn]), **sampling}
        answer = await CHAT.invoke(service, {}, body=body)
    if isinstance(answer, Events):
        return _streamed(_generate_lines(answer, given, service))
    await _kept(service, given.model, given.keep_alive)
    if isinstance(answer, Completion):
        choice = answer.choices[0]
        done = _done(answer.model, choice.finish_reason, answer.usage, time.monotonic())
        return _json(GenerateResponse(response=choice.text, **done))
    assert isinstance(answer, ChatCompletion)
    said = answer.choices[0].message
    thinking = getattr(said, "reasoning_content", None) or None
    done = _done(answer.model, answer.choices[0].finish_reason, answer.usage, time.monotonic())
    return _json(GenerateResponse(response=said.content or "", thinking=thinking, **done))


@router.post("/embed", response_class=Response, responses={200: {"model": EmbedResponse}}, tags=["Ollama"])
async def embed(request: Request, given: EmbedRequest) -> Response:
    """Embeddings of `input` (one text or several)."""
    service: Service = request.app.state.service
    started = time.monotonic()
    body = {"model": given.model, "input": given.input, "dimensions": given.dimensions}
    answer = await EMBEDDING.invoke(service, {}, body={k: v for k, v in body.items() if v is not None})
    assert isinstance(answer, CreateEmbeddingResponse)
    await _kept(service, given.model, given.keep_alive)
    return _json(
        EmbedResponse(
            model=answer.model,
            created_at=_now(),
            embeddings=[list(map(float, item.embedding)) for item in answer.data],
            prompt_eval_count=answer.usage.prompt_tokens,
            total_duration=_nanoseconds(started),
        )
    )


@router.post(
    "/embeddings", response_class=Response, responses={200: {"model": EmbeddingsResponse}}, tags=["Ollama"]
)
async def embeddings(request: Request, given: EmbeddingsRequest) -> Response:
    """The embedding of one `prompt` (Ollama's older endpoint)."""
    service: Service = request.app.state.service
    answer = await EMBEDDING.invoke(service, {}, body={"model": given.model, "input": given.prompt})
    assert isinstance(answer, CreateEmbeddingResponse)
    await _kept(service, given.model, given.keep_alive)
    return _json(EmbeddingsResponse(embedding=list(map(float, answer.data[0].embedding))))


@router.get("/tags", response_class=Response, responses={200: {"model": Tags}}, tags=["Ollama"])
async def tags(request: Request) -> Response:
    """The models the caller may use that Ollama's apps can: chat, completion and embedding models."""
    service: Service = request.app.state.service
    served = [m for m in await service.list_models() if _abilities(m)]
    return _json(
        Tags(
            models=[
                TaggedModel(
                    name=m.id,
                    model=m.id,
                    modified_at=_created(m),
                    size=_size(m),
                    digest="",
                    details=_details(m),
                )
                for m in served
            ]
        )
    )


@router.get("/ps", response_class=Response, responses={200: {"model": Running}}, tags=["Ollama"])
async def running(request: Request) -> Response:
    """The models loaded now, and when each is unloaded if it stays idle."""
    service: Service = request.app.state.service
    loaded = [m for m in await service.list_models(loaded=True) if _abilities(m)]
    return _json(
        Running(
            models=[
                RunningModel(
                    name=m.id,
                    model=m.id,
                    size=_size(m),
                    size_vram=ByteSize(0),
                    digest="",
                    details=_details(m),
                    expires_at=_expiry(m),
                )
                for m in loaded
            ]
        )
    )


@router.post("/show", response_class=Response, responses={200: {"model": ShowResponse}}, tags=["Ollama"])
async def show(request: Request, given: ModelRequest) -> Response:
    """One model: its details and what it can do (Ollama's capability names)."""
    service: Service = request.app.state.service
    model = service.retrieve_model(given.named)
    return _json(
        ShowResponse(
            modified_at=_created(model),
            details=_details(model),
            capabilities=_abilities(model),
            model_info={},
            parameters="",
            template="",
        )
    )


@router.get("/version", response_class=Response, responses={200: {"model": Version}}, tags=["Ollama"])
async def version() -> Response:
    """The Ollama API version these shapes follow."""
    return _json(Version(version=VERSION))


async def _managed_elsewhere(request: Request) -> Response:
    """Pulling, pushing, creating, copying and deleting models are `modelport pull` and `models.toml`'s."""
    action = request.url.path.rstrip("/").rsplit("/", 1)[-1]
    raise InvalidRequestError(
        f"/api/{action}: modelport's models are managed with `modelport pull` and `models.toml`, not through "
        "the Ollama API."
    )


for _path, _method in (
    ("/pull", "POST"),
    ("/push", "POST"),
    ("/create", "POST"),
    ("/copy", "POST"),
    ("/delete", "DELETE"),
):
    router.add_api_route(
        _path, _managed_elsewhere, methods=[_method], response_class=Response, tags=["Ollama"]
    )


# Requests in.


def _messages(given: list[ChatMessage]) -> list[dict[str, Any]]:
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


def _data_url(image: str) -> str:
    """An image as Ollama sends it (base64, no media type) as a data URL; one given as a data URL is kept."""
    if image.startswith("data:"):
        return image
    kind = next((k for prefix, k in _IMAGE_KINDS.items() if image.startswith(prefix)), "image/png")
    return f"data:{kind};base64,{image}"


def _sampling(given: ChatRequest | GenerateRequest) -> dict[str, Any]:
    """What a request's `options`, `format`, `think` and `stream` ask of the generation."""
    options = given.options or Options()
    body: dict[str, Any] = {"stream": given.stream}
    if given.stream:
        body["stream_options"] = {"include_usage": True}
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
    return body


async def _load(
    service: Service, model: str, keep_alive: Any, shape: type[BaseModel], **fields: Any
) -> BaseModel:
    """A request with nothing to generate: the model loaded (or, `keep_alive: 0`, unloaded), as Ollama
    does it."""
    seconds = keep_alive_seconds(keep_alive) if keep_alive is not None else 300.0
    await service.keep_alive(model, seconds)
    named = service.retrieve_model(model).id
    reason = "unload" if seconds == 0 else "load"
    return shape(model=named, created_at=_now(), done=True, done_reason=reason, **fields)


async def _kept(service: Service, model: str, keep_alive: Any) -> None:
    """A request's `keep_alive`, applied once its answer is made."""
    if keep_alive is not None:
        await service.keep_alive(model, keep_alive_seconds(keep_alive))


# Answers out.


def _json(answer: BaseModel) -> Response:
    return Response(answer.model_dump_json(exclude_none=True, by_alias=True), media_type="application/json")


def _streamed(lines: AsyncGenerator[bytes, None]) -> StreamingResponse:
    return StreamingResponse(lines, media_type=NDJSON)


def _line(answer: BaseModel) -> bytes:
    return answer.model_dump_json(exclude_none=True, by_alias=True).encode() + b"\n"


def _empty() -> Message:
    return Message(role="assistant", content="")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


def _nanoseconds(since: float) -> int:
    return int((time.monotonic() - since) * 1e9)


def _tool_call(name: str, arguments: str) -> Message.ToolCall:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        parsed = {}
    return Message.ToolCall(
        function=Message.ToolCall.Function(name=name, arguments=parsed if isinstance(parsed, dict) else {})
    )


def _done(
    model: str, finish: str | None, usage: Any, started: float, first: float | None = None
) -> dict[str, Any]:
    """The fields of the last object: why it stopped and what it counted."""
    ended = time.monotonic()
    first = first or ended
    return {
        "model": model,
        "created_at": _now(),
        "done": True,
        "done_reason": "length" if finish == "length" else "stop",
        "prompt_eval_count": getattr(usage, "prompt_tokens", None) if usage is not None else None,
        "eval_count": getattr(usage, "completion_tokens", None) if usage is not None else None,
        "total_duration": int((ended - started) * 1e9),
        "prompt_eval_duration": int((first - started) * 1e9),
        "eval_duration": int((ended - first) * 1e9),
    }


class _Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Reading:
    """A stream of chunks as it is read: its text and thinking piece by piece, and what the last line says
    (the model, the usage, why it stopped, when the first token came), and the calls, held until whole."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.started = time.monotonic()
        self.first: float | None = None  # when the first token came
        self.finish: str | None = None
        self.usage = _Usage()
        self.calls: dict[int, dict[str, str]] = {}

    async def pieces(self, answer: Events[Any]) -> AsyncGenerator[tuple[str, str | None], None]:
        """(text, thinking) as they come."""
        async for chunk in answer.items:
            self.model = str(chunk.get("model") or self.model)
            if chunk.get("usage"):
                self.usage = _Usage.model_validate(chunk["usage"])
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                for call in delta.get("tool_calls") or ():
                    held = self.calls.setdefault(call.get("index", 0), {"name": "", "arguments": ""})
                    function = call.get("function") or {}
                    held["name"] += function.get("name") or ""
                    held["arguments"] += function.get("arguments") or ""
                text = choice.get("text") if "text" in choice else delta.get("content")  # a completion's
                thought = delta.get("reasoning_content")
                if text or thought:
                    self.first = self.first or time.monotonic()
                    yield text or "", thought or None
                self.finish = choice.get("finish_reason") or self.finish

    def tool_calls(self) -> list[Message.ToolCall]:
        return [_tool_call(c["name"], c["arguments"]) for _, c in sorted(self.calls.items())]

    def done(self) -> dict[str, Any]:
        return _done(self.model, self.finish, self.usage, self.started, self.first)


async def _chat_lines(
    answer: Events[Any], given: ChatRequest, service: Service
) -> AsyncGenerator[bytes, None]:
    """A streamed chat as Ollama's lines: text and thinking as they come, the calls (each whole once its
    arguments are), then the last line."""
    reading = _Reading(given.model)
    try:
        async for text, thought in reading.pieces(answer):
            said = Message(role="assistant", content=text, thinking=thought)
            yield _line(ChatResponse(model=reading.model, created_at=_now(), message=said, done=False))
        if reading.calls:
            said = Message(role="assistant", content="", tool_calls=reading.tool_calls())
            yield _line(ChatResponse(model=reading.model, created_at=_now(), message=said, done=False))
        await _kept(service, given.model, given.keep_alive)
        yield _line(ChatResponse(message=_empty(), **reading.done()))
    except ModelportError as error:
        yield orjson.dumps({"error": error.message}) + b"\n"
    finally:
        await answer.aclose()


async def _generate_lines(
    answer: Events[Any], given: GenerateRequest, service: Service
) -> AsyncGenerator[bytes, None]:
    """A streamed generation (of a chat or a raw completion) as Ollama's lines."""
    reading = _Reading(given.model)
    try:
        async for text, thought in reading.pieces(answer):
            piece = GenerateResponse(
                model=reading.model, created_at=_now(), response=text, thinking=thought, done=False
            )
            yield _line(piece)
        await _kept(service, given.model, given.keep_alive)
        yield _line(GenerateResponse(response="", **reading.done()))
    except ModelportError as error:
        yield orjson.dumps({"error": error.message}) + b"\n"
    finally:
        await answer.aclose()


# Models.


def _abilities(model: Model) -> list[str]:
    """What a model can do, in Ollama's capability names (none for what Ollama's apps cannot use)."""
    held = set(getattr(model, "capabilities", None) or ())
    names = []
    if held & {"chat", "completion"}:
        names.append("completion")
    if "chat" in held:
        names += ["tools", "thinking"] if getattr(model, "chat_format", None) else ["tools"]
    if "completion" in held:
        names.append("insert")
    if "vision" in held:
        names.append("vision")
    if "embedding" in held:
        names.append("embedding")
    return names


def _details(model: Model) -> ModelDetails:
    return ModelDetails(
        format="gguf" if "chat" in (getattr(model, "capabilities", None) or ()) else "", family=model.owned_by
    )


def _created(model: Model) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(model.created, datetime.UTC)


def _size(model: Model) -> ByteSize:
    return ByteSize(int(getattr(model, "memory_bytes", 0) or 0))


def _expiry(model: Model) -> datetime.datetime | None:
    keep_alive, idle = getattr(model, "keep_alive", None), getattr(model, "idle_seconds", 0.0)
    if not isinstance(keep_alive, int | float):
        return None
    return datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=max(0.0, keep_alive - idle))
