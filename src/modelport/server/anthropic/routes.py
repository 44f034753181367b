"""The Messages API's routes (`/v1/messages`, `/v1/messages/count_tokens`): each translates its request,
calls the `chat.completions.create` row as every face does, and renders the answer in Anthropic's shape.
The models' list in Anthropic's shape is rendered here too, for the `models` rows."""

from __future__ import annotations

import datetime

from anthropic.types import Message, MessageTokensCount, ModelInfo
from fastapi import APIRouter, Request
from fastapi.responses import Response
from openai.types import Model
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from modelport.errors import InvalidRequestError
from modelport.protocol.answers import Events
from modelport.server.anthropic.from_chat import Seal, events, message
from modelport.server.anthropic.message_request import CountTokensRequest, MessagesRequest
from modelport.server.anthropic.to_chat import Verify, chat_request
from modelport.server.streaming import EventStream
from modelport.service import Service
from modelport.service.operation_table import OPERATIONS

router = APIRouter()
CHAT = OPERATIONS.by_name("chat.completions.create")
# What marks a request as Anthropic's (its SDKs and Claude Code always send it).
VERSION_HEADER = "anthropic-version"


@router.post("/messages", response_class=Response, responses={200: {"model": Message}}, tags=["Anthropic"])
async def create_message(request: Request, given: MessagesRequest) -> Response:
    """Anthropic's Messages API: a `Message`, or its events streamed (`"stream": true`)."""
    service: Service = request.app.state.service
    chat = chat_request(given, _verify(service), stream=given.stream)
    answer = await CHAT.invoke(service, {}, body=chat)
    seal = _seal(service)
    if isinstance(answer, Events):
        return EventStream(events(answer, given.model, seal))
    assert isinstance(answer, ChatCompletion)
    return _json(message(answer, seal))


@router.post(
    "/messages/count_tokens",
    response_class=Response,
    responses={200: {"model": MessageTokensCount}},
    tags=["Anthropic"],
)
async def count_message_tokens(request: Request, given: CountTokensRequest) -> Response:
    """The input tokens the same Messages request would use, counted by the model (its template, tools and
    history): the prompt is read and one token made."""
    service: Service = request.app.state.service
    chat = chat_request(given, _verify(service), stream=False)
    chat.max_completion_tokens = 1
    answer = await CHAT.invoke(service, {}, body=chat)
    assert isinstance(answer, ChatCompletion)
    assert answer.usage is not None
    return _json(MessageTokensCount(input_tokens=answer.usage.prompt_tokens))


def _json(answer: BaseModel) -> Response:
    return Response(answer.model_dump_json(exclude_unset=True), media_type="application/json")


def _seal(service: Service) -> Seal:
    sealer = service.responses.sealer
    return sealer.seal if sealer is not None else (lambda _: "")


def _verify(service: Service) -> Verify:
    """A thinking block's signature checked against its text: this server's seal of that very text."""
    sealer = service.responses.sealer
    if sealer is None:
        return None

    def verify(signature: str, thinking: str, param: str) -> None:
        if sealer.open(signature, param) != thinking:
            raise InvalidRequestError(
                "The thinking block was changed since this server signed it.",
                param=param,
                code="invalid_signature",
            )

    return verify


class ModelPage(BaseModel):
    """`GET /v1/models` as Anthropic lists models."""

    data: list[ModelInfo]
    has_more: bool
    first_id: str | None
    last_id: str | None


def models_shaped(operation: str, answer: object) -> object:
    """The `models` rows' answers as Anthropic's `ModelInfo` (for a request that carries
    `anthropic-version`); any other answer as it is."""
    if operation == "models.retrieve" and isinstance(answer, Model):
        return _model_info(answer)
    if operation == "models.list" and isinstance(answer, dict):
        infos = [_model_info(m) for m in answer.get("data", []) if isinstance(m, Model)]
        return ModelPage(
            data=infos,
            has_more=False,
            first_id=infos[0].id if infos else None,
            last_id=infos[-1].id if infos else None,
        )
    return answer


def _model_info(model: Model) -> ModelInfo:
    created = datetime.datetime.fromtimestamp(model.created, datetime.UTC)
    return ModelInfo(type="model", id=model.id, display_name=model.id, created_at=created, lifecycle="active")
