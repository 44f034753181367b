"""The Responses API (`/v1/responses`) on the chat path: a turn becomes a chat completion (its stored
conversation, its tools, its output format). A streamed (or background) turn's chunks become the Responses
events, whose last one carries the final `Response`; a turn that is not streamed becomes its `Response`
straight from the whole chat answer. Stored turns chain with `previous_response_id`; background turns run
on as jobs. Here, the operations; a turn's run (its rounds of chat answers and tools) is in `turn`, what is
stored of it in `storing`, the `Response` it starts from in `skeleton`."""

from __future__ import annotations

import time
from typing import Any

from openai.types.chat import ChatCompletion
from openai.types.responses import (
    CompactedResponse,
    InputTokenCountResponse,
    Response,
    ResponseCompactionItem,
    ResponseStreamEvent,
)
from openai.types.responses.response import Conversation as ResponseConversation
from openai.types.responses.response import IncompleteDetails

from modelport import context
from modelport.errors import InvalidRequestError, NotFoundError
from modelport.predictors.registry import ModelRegistry
from modelport.protocol.answers import Events, ListPage, ResponseDeleted, mapped
from modelport.protocol.response_object import ResponseObject
from modelport.protocol.response_request import (
    CompactRequest,
    InputTokensRequest,
    ResponseRequest,
    conversation_id,
)
from modelport.protocol.validation import parse
from modelport.service import calls
from modelport.service.fetching import Fetcher
from modelport.service.responses import compaction, items
from modelport.service.responses.background import Jobs
from modelport.service.responses.client_tools import added_tools, client_tools
from modelport.service.responses.conversations import Conversations
from modelport.service.responses.event_stream import RESPONSE_EVENTS, replayed, wire
from modelport.service.responses.output import completion_output, usage
from modelport.service.responses.sealing import Sealer
from modelport.service.responses.server_tools import SERVED, ServerTools, server_tools
from modelport.service.responses.skeleton import skeleton
from modelport.service.responses.storing import Ending, StoredTurns, missing, new_row
from modelport.service.responses.turn import ChatAnswers, TurnLoop, summarised, turn_chat
from modelport.service.state.listing import bounded_limit, checked_order
from modelport.service.vectors import VectorStores
from modelport.settings import DEFAULT_CHAT, Limits
from modelport.store import Store
from modelport.store.response_rows import UNFINISHED


class Responses:
    """`/v1/responses`: create, retrieve (or replay as events), delete, cancel, and input items."""

    def __init__(
        self,
        models: ChatAnswers,
        registry: ModelRegistry,
        store: Store | None,
        vector_stores: VectorStores,
        fetcher: Fetcher,
        limits: Limits,
        background_timeout: float = 15.0,
        sealer: Sealer | None = None,
    ) -> None:
        self.sealer = sealer
        self.registry = registry
        self.vector_stores = vector_stores
        self.fetcher = fetcher
        self.limits = limits
        self.conversations = Conversations(store, limits)
        self.stored = StoredTurns(store, self.conversations)
        self.turns = TurnLoop(models, self.stored, sealer)
        self.jobs = Jobs(store, background_timeout) if store is not None else None

    async def create(self, request: ResponseRequest) -> Response | Events[Response, ResponseStreamEvent]:
        """A whole `Response`, its events (`stream`), or at once a queued one (`background`)."""
        store = self.stored.storing(request)
        model_id = self.registry.resolve(request.model).id
        conversation = conversation_id(request.conversation)
        if conversation is not None and request.previous_response_id is not None:
            items.refuse_unsupported(request)  # the 400 that says why
        earlier: list[dict[str, Any]] = []
        if conversation is not None:
            history = items.messages(await self.conversations.history(conversation))
        else:
            history, earlier = await self.stored.history(request.previous_response_id)
        given = await self.stored.referenced(items.input_items(request), "input")
        turn = items.opened(given, self.turns.open_sealed, "input")
        tools = await server_tools(
            request.tools or [], request.include or [], self.vector_stores, self.fetcher,
            self.limits.mcp_seconds, self.limits.mcp_output_chars,
        )  # fmt: skip
        client = client_tools(request.tools or [], added_tools(turn), SERVED)
        compacting = compaction.asked(history, turn, request.compaction())
        # A turn whose tools the server runs is several chat answers, one that may compact its context a
        # summary and an answer: they stream inside it, always.
        before = compacting is not None and compacting.first  # may compact before its first round
        streamed = request.stream or request.background or bool(tools) or before
        chat = turn_chat(request, history, turn, streamed, tools, client)
        response = skeleton(request, model_id, store)
        chat.prompt_cache_key = request.prompt_cache_key
        if chat.prompt_cache_key is None and not history and (store or conversation is not None):
            # A conversation's first turn, kept to be gone on from, keeps its prompt too (a model's cache
            # would drop a first message alone, as most are one-off questions), under its own id.
            chat.prompt_cache_key = response.id
        if conversation is not None:
            response.conversation = ResponseConversation(id=conversation)
        row = new_row(request, turn, response) if store else None
        ended = Ending(row, turn, conversation, context.current().project, earlier)
        if request.background:
            assert self.jobs is not None
            assert row is not None
            queued = response.model_copy(deep=True)  # as it was queued: the job goes on with `response`
            turned = self.turns.events(chat, request, response, ended, tools, client, compacting)
            await self.jobs.start(row, wire(turned))
            return self._followed(row["id"], -1) if request.stream else queued
        if request.stream:
            turned = self.turns.events(chat, request, response, ended, tools, client, compacting)
            return Events(await calls.eager(turned), RESPONSE_EVENTS)
        if tools or before:
            async for _ in self.turns.events(chat, request, response, ended, tools, client, compacting):
                pass
            return response
        answer = await self.turns.answer(chat, request, request.truncation == "auto", turn)
        assert isinstance(answer, ChatCompletion)
        whole = answer.model_dump(mode="json", exclude_unset=True)
        choice = whole["choices"][0] if whole["choices"] else {}
        sealing = self.turns.sealing(request)
        response.output = [*completion_output(choice, client, summarised(request), sealing)]
        response.completed_at = int(time.time())
        response.usage = usage(whole["usage"]) if whole.get("usage") else None
        if choice.get("finish_reason") == "length":
            response.status = "incomplete"
            response.incomplete_details = IncompleteDetails(reason="max_output_tokens")
        else:
            response.status = "completed"
        await self.stored.finish(ended, response)
        return response

    async def retrieve(
        self, response_id: str, stream: bool = False, starting_after: int | None = None
    ) -> Response | Events[Response, ResponseStreamEvent]:
        """A stored response, or (`stream`) its events after `starting_after`: a background one's as they
        happened and as they go on; any other's rebuilt from what was stored."""
        row = await self.stored.row(response_id)
        if self.jobs is not None:
            row = await self.jobs.reap(row)
        if not stream:
            return _response_of(row["response"])
        if row["background"]:
            after = starting_after if starting_after is not None else -1
            return self._followed(response_id, after)
        return Events(replayed(row["response"], starting_after), RESPONSE_EVENTS)

    def _followed(self, response_id: str, after: int) -> Events[Response, ResponseStreamEvent]:
        """A background job's events after sequence number `after`, as the store keeps them (JSON) typed
        as the stream passes them on."""
        assert self.jobs is not None
        return Events(mapped(self.jobs.follow(response_id, after), RESPONSE_EVENTS.parse), RESPONSE_EVENTS)

    async def delete(self, response_id: str) -> ResponseDeleted:
        """`DELETE /v1/responses/{id}`."""
        if not await self.stored.required().responses.delete(response_id, context.current().project):
            raise missing(response_id)
        return ResponseDeleted(id=response_id)

    async def cancel(self, response_id: str) -> Response:
        """`POST /v1/responses/{id}/cancel`: stop a background response (within one event); what it
        produced is kept."""
        row = await self.stored.row(response_id)
        if not row["background"]:
            raise InvalidRequestError("Only a background response can be cancelled.", param="response_id")
        assert self.jobs is not None
        if row["status"] in UNFINISHED:  # cancelling again answers with the final object
            await self.jobs.cancel(response_id, row["response"])
        return _response_of((await self.stored.row(response_id))["response"])

    async def input_tokens(self, given: InputTokensRequest) -> InputTokenCountResponse:
        """`POST /v1/responses/input_tokens`: the input tokens the same `POST /v1/responses` would use,
        counted by the model itself (its template, tools and history; the prompt is read and one token
        made, none kept): what that response's `usage.input_tokens` says. Tools the server runs are
        counted as the functions they are offered as only once they are prepared, so they are not here."""
        # Fields it does not declare are those of `POST /v1/responses`, checked as that takes them (a 400
        # naming the one at fault: the fuzzer's `service_tier: [null, 634119]` was a 500).
        request = parse(
            ResponseRequest,
            {
                **given.model_dump(exclude_none=True, by_alias=True),  # a tool's `async`, not `async_`
                "model": given.model or DEFAULT_CHAT,
                "store": False,
            },
        )
        conversation = conversation_id(request.conversation)
        if conversation is not None:
            history = items.messages(await self.conversations.history(conversation))
        else:
            history, _ = await self.stored.history(request.previous_response_id)
        turn = await self.stored.referenced(items.input_items(request), "input")
        client = client_tools(request.tools or [], added_tools(turn), SERVED)
        chat = turn_chat(request, history, turn, False, ServerTools(self.vector_stores), client)
        chat.max_completion_tokens, chat.max_tokens = 1, None
        answer = await self.turns.answer(chat, request, request.truncation == "auto", turn)
        assert isinstance(answer, ChatCompletion)
        assert answer.usage is not None
        return InputTokenCountResponse(
            input_tokens=answer.usage.prompt_tokens, object="response.input_tokens"
        )

    async def compact(self, given: CompactRequest) -> CompactedResponse:
        """`POST /v1/responses/compact`: the conversation (the turns before `previous_response_id`, then
        `input`) as its user messages and one compaction item, the chat model's summary of the rest
        (`compaction`)."""
        turns, _ = await self.stored.earlier(given.previous_response_id)
        request = ResponseRequest.model_validate({"model": given.model, "input": given.input})
        turns.append(await self.stored.referenced(items.input_items(request), "input"))
        conversation = [item for turn in turns for item in turn]
        messages = [message for turn in turns for message in items.messages(turn)]
        answer = await self.turns.summary(given.model, messages, given.instructions, given.max_output_tokens)
        assert answer.usage is not None
        kept = compaction.item(items.new_item_id("cmp"), (answer.choices[0].message.content or "").strip())
        return CompactedResponse.model_construct(
            id=items.new_item_id("resp"),
            object="response.compaction",
            created_at=int(time.time()),
            output=[*compaction.user_messages(conversation), ResponseCompactionItem.model_validate(kept)],
            usage=usage(answer.usage.model_dump(exclude_unset=True)),
        )

    async def input_items(
        self,
        response_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str | None = None,
    ) -> ListPage[dict[str, Any]]:
        """`GET /v1/responses/{id}/input_items`: the turn's input items, newest first unless `order` is
        `asc`."""
        listed = list((await self.stored.row(response_id))["input_items"])
        if checked_order(order, "desc") == "desc":
            listed.reverse()
        if after is not None:
            ids = [item.get("id") for item in listed]
            if after not in ids:
                raise NotFoundError(
                    f"No input item found with id '{after}' (the `after` cursor).", param="after"
                )
            listed = listed[ids.index(after) + 1 :]
        size = bounded_limit(limit)
        return ListPage(listed[:size], len(listed) > size)


def _response_of(response: dict[str, Any]) -> ResponseObject:
    return ResponseObject.model_validate(response)
