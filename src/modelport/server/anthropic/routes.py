"""The Messages API's routes (`/v1/messages`, `/v1/messages/count_tokens`): each translates its request,
calls the `chat.completions.create` row as every face does, and renders the answer in Anthropic's shape.

Anthropic's types (the `anthropic` package: 2 s of a 2-core machine's start, a quarter of the server's
imports) are imported when the face is first used: by its first request, and by the OpenAPI document,
which is completed with them when it is first asked for (`documented_answers`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request
from fastapi.responses import Response
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from modelport.errors import InvalidRequestError
from modelport.protocol.answers import Events
from modelport.protocol.sent_as import renamed
from modelport.server.anthropic.message_request import CountTokensRequest, MessagesRequest
from modelport.server.anthropic.to_chat import Verify, chat_request
from modelport.server.json_routes import json_router
from modelport.server.streaming import EventStream
from modelport.service import Service
from modelport.service.operation_table import OPERATIONS

if TYPE_CHECKING:
    from modelport.server.anthropic.from_chat import Seal

router = json_router("/v1")  # where Anthropic's SDKs send it
CHAT = OPERATIONS.by_name("chat.completions.create")
# What marks a request as Anthropic's (its SDKs and Claude Code always send it).
VERSION_HEADER = "anthropic-version"


@router.post("/messages", response_class=Response, tags=["Anthropic"])
async def create_message(request: Request, given: MessagesRequest) -> Response:
    """Anthropic's Messages API: a `Message`, or its events streamed (`"stream": true`)."""
    from modelport.server.anthropic.from_chat import events, message

    service: Service = request.app.state.service
    chat, sent = chat_request(given, verifier(service), stream=given.stream)
    with renamed(sent):
        answer = await CHAT.invoke(service, {}, body=chat)
    seal = seal_of(service)
    if isinstance(answer, Events):
        return EventStream(events(answer, given.model, seal))
    assert isinstance(answer, ChatCompletion)
    return json_answer(message(answer, seal))


@router.post("/messages/count_tokens", response_class=Response, tags=["Anthropic"])
async def count_message_tokens(request: Request, given: CountTokensRequest) -> Response:
    """The input tokens the same Messages request would use, counted by the model (its template, tools and
    history): the prompt is read and one token made."""
    from anthropic.types import MessageTokensCount

    service: Service = request.app.state.service
    chat, sent = chat_request(given, verifier(service), stream=False)
    chat.max_completion_tokens = 1
    with renamed(sent):
        answer = await CHAT.invoke(service, {}, body=chat)
    assert isinstance(answer, ChatCompletion)
    assert answer.usage is not None
    return json_answer(MessageTokensCount(input_tokens=answer.usage.prompt_tokens))


def json_answer(answer: BaseModel) -> Response:
    return Response(answer.model_dump_json(exclude_unset=True), media_type="application/json")


def seal_of(service: Service) -> Seal:
    sealer = service.responses.sealer
    return sealer.seal if sealer is not None else (lambda _: "")


def verifier(service: Service) -> Verify:
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


def answers() -> dict[str, type[BaseModel]]:
    """The routes' answers by path (a `Message`, a `MessageTokensCount`), for the OpenAPI document
    (`documented_answers`)."""
    from anthropic.types import Message, MessageTokensCount

    shapes: dict[str, type[BaseModel]] = {"messages": Message, "messages/count_tokens": MessageTokensCount}
    return {f"{router.prefix}/{path}": shape for path, shape in shapes.items()}
