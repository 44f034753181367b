"""The Responses API (`/v1/responses`) on the chat path: a turn becomes a chat completion (its stored
conversation, its tools, its output format). A streamed (or background) turn's chunks become the Responses
events, whose last one carries the final `Response`; a turn that is not streamed becomes its `Response`
straight from the whole chat answer. Stored turns chain with `previous_response_id`; background turns run
on as jobs."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
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
from modelport.errors import InvalidRequestError, ModelportError, NotFoundError, StoreDisabledError
from modelport.protocol.answers import Events, ListPage, ResponseDeleted
from modelport.protocol.requests import ChatCompletionRequest, ChatMessage
from modelport.protocol.response_object import ResponseObject
from modelport.protocol.response_request import CompactRequest, InputTokensRequest, ResponseRequest
from modelport.protocol.validation import parse
from modelport.service import calls
from modelport.service.fetching import Fetcher
from modelport.service.generation.flat_tools import chat_request
from modelport.service.responses import compaction, items
from modelport.service.responses.background import Jobs
from modelport.service.responses.client_tools import ClientTools, added_tools, client_tools
from modelport.service.responses.conversations import Conversations
from modelport.service.responses.output import completion_output, usage
from modelport.service.responses.response_events import RESPONSE_EVENTS, ResponseEvents, replayed, wire
from modelport.service.responses.sealing import Sealer
from modelport.service.responses.server_tools import SERVED, ServerTools, answered, server_tools
from modelport.service.responses.tool_specs import redacted, with_defaults
from modelport.service.state.listing import bounded_limit, checked_order
from modelport.service.vectors import VectorStores
from modelport.settings import DEFAULT_CHAT, Limits
from modelport.store import Store
from modelport.store.response_rows import UNFINISHED

Chat = Callable[[ChatCompletionRequest], Awaitable[ChatCompletion | Events[ChatCompletion]]]
_TRUNCATION_TRIES = 8  # `truncation: auto` drops the oldest turn this many times at most
_ROUNDS = 8  # chat answers in one turn at most: the last one may not call a server-run tool


class Responses:
    """`/v1/responses`: create, retrieve (or replay as events), delete, cancel, and input items."""

    def __init__(
        self,
        chat: Chat,
        resolve: Callable[[str], str],
        store: Store | None,
        vector_stores: VectorStores,
        fetcher: Fetcher,
        limits: Limits,
        background_timeout: float = 15.0,
        sealer: Sealer | None = None,
    ) -> None:
        self._chat = chat
        self.sealer = sealer
        self._resolve = resolve
        self.store = store
        self.vector_stores = vector_stores
        self.fetcher = fetcher
        self.limits = limits
        self.conversations = Conversations(store, limits)
        self.jobs = Jobs(store, background_timeout) if store is not None else None

    async def create(self, request: ResponseRequest) -> Response | Events[Response]:
        """A whole `Response`, its events (`stream`), or at once a queued one (`background`)."""
        store = self._storing(request)
        model_id = self._resolve(request.model)
        conversation = _conversation_id(request.conversation)
        if conversation is not None and request.previous_response_id is not None:
            items.refuse_unsupported(request)  # the 400 that says why
        earlier: list[dict[str, Any]] = []
        if conversation is not None:
            history = items.messages(await self.conversations.history(conversation))
        else:
            history, earlier = await self._history(request.previous_response_id)
        turn = items.opened(items.input_items(request), self._open_sealed, "input")
        tools = await server_tools(
            request.tools or [], request.include or [], self.vector_stores, self.fetcher,
            self.limits.mcp_seconds, self.limits.mcp_output_chars,
        )  # fmt: skip
        client = client_tools(request.tools or [], added_tools(turn), SERVED)
        # A turn whose tools the server runs is several chat answers: they stream inside it, always.
        streamed = request.stream or request.background or bool(tools)
        chat = self._chat_request(request, history, turn, streamed, tools, client)
        response = _skeleton(request, model_id, store)
        if conversation is not None:
            response.conversation = ResponseConversation(id=conversation)
        row = _new_row(request, turn, response) if store else None
        ended = _Ending(row, turn, conversation, context.current().project, earlier)
        if request.background:
            assert self.jobs is not None
            assert row is not None
            queued = response.model_copy(deep=True)  # as it was queued: the job goes on with `response`
            await self.jobs.start(row, wire(self._run(chat, request, response, ended, tools, client)))
            return Events(self.jobs.follow(row["id"], -1), RESPONSE_EVENTS) if request.stream else queued
        if request.stream:
            events = await calls.eager(wire(self._run(chat, request, response, ended, tools, client)))
            return Events(events, RESPONSE_EVENTS)
        if tools:
            async for _ in self._run(chat, request, response, ended, tools, client):
                pass
            return response
        answer = await self._chat_answer(chat, request.truncation == "auto", turn)
        assert isinstance(answer, ChatCompletion)
        whole = answer.model_dump(mode="json", exclude_unset=True)
        choice = whole["choices"][0] if whole["choices"] else {}
        response.output = [*completion_output(choice, client, _summarised(request), self._sealing(request))]
        response.completed_at = int(time.time())
        response.usage = usage(whole["usage"]) if whole.get("usage") else None
        if choice.get("finish_reason") == "length":
            response.status = "incomplete"
            response.incomplete_details = IncompleteDetails(reason="max_output_tokens")
        else:
            response.status = "completed"
        await self._finish(ended, response)
        return response

    async def retrieve(
        self, response_id: str, stream: bool = False, starting_after: int | None = None
    ) -> Response | Events[Response]:
        """A stored response, or (`stream`) its events after `starting_after`: a background one's as they
        happened and as they go on; any other's rebuilt from what was stored."""
        row = await self._row(response_id)
        if self.jobs is not None:
            row = await self.jobs.reap(row)
        if not stream:
            return _response_of(row["response"])
        if row["background"]:
            assert self.jobs is not None
            after = starting_after if starting_after is not None else -1
            return Events(self.jobs.follow(response_id, after), RESPONSE_EVENTS)
        return Events(wire(replayed(row["response"], starting_after)), RESPONSE_EVENTS)

    async def delete(self, response_id: str) -> ResponseDeleted:
        """`DELETE /v1/responses/{id}`."""
        if not await self._store().responses.delete(response_id, context.current().project):
            raise _missing(response_id)
        return ResponseDeleted(id=response_id)

    async def cancel(self, response_id: str) -> Response:
        """`POST /v1/responses/{id}/cancel`: stop a background response (within one event); what it
        produced is kept."""
        row = await self._row(response_id)
        if not row["background"]:
            raise InvalidRequestError("Only a background response can be cancelled.", param="response_id")
        assert self.jobs is not None
        if row["status"] in UNFINISHED:  # cancelling again answers with the final object
            await self.jobs.cancel(response_id, row["response"])
        return _response_of((await self._row(response_id))["response"])

    async def input_tokens(self, given: InputTokensRequest) -> InputTokenCountResponse:
        """`POST /v1/responses/input_tokens`: the input tokens the same `POST /v1/responses` would use,
        counted by the model itself (its template, tools and history; the prompt is read and one token
        made, none kept): what that response's `usage.input_tokens` says. Tools the server runs are
        counted as the functions they are offered as only once they are prepared, so they are not here."""
        # Fields it does not declare are those of `POST /v1/responses`, checked as that takes them (a 400
        # naming the one at fault: the fuzzer's `service_tier: [null, 634119]` was a 500).
        request = parse(
            ResponseRequest,
            {**given.model_dump(exclude_none=True), "model": given.model or DEFAULT_CHAT, "store": False},
        )
        conversation = _conversation_id(request.conversation)
        if conversation is not None:
            history = items.messages(await self.conversations.history(conversation))
        else:
            history, _ = await self._history(request.previous_response_id)
        turn = items.input_items(request)
        client = client_tools(request.tools or [], added_tools(turn), SERVED)
        chat = self._chat_request(request, history, turn, False, ServerTools(self.vector_stores), client)
        chat.max_completion_tokens, chat.max_tokens = 1, None
        answer = await self._chat_answer(chat, request.truncation == "auto", turn)
        assert isinstance(answer, ChatCompletion)
        assert answer.usage is not None
        return InputTokenCountResponse(
            input_tokens=answer.usage.prompt_tokens, object="response.input_tokens"
        )

    async def compact(self, given: CompactRequest) -> CompactedResponse:
        """`POST /v1/responses/compact`: the conversation (the turns before `previous_response_id`, then
        `input`) as its user messages and one compaction item, the chat model's summary of the rest
        (`compaction`)."""
        turns, _ = await self._earlier(given.previous_response_id)
        request = ResponseRequest.model_validate({"model": given.model, "input": given.input})
        turns.append(items.input_items(request))
        conversation = [item for turn in turns for item in turn]
        messages = [message for turn in turns for message in items.messages(turn)]
        said = compaction.transcript(messages)
        chat = ChatCompletionRequest.model_validate(
            {
                "model": given.model,
                "messages": [{"role": "user", "content": compaction.prompt(said, given.instructions)}],
                "temperature": 0,
                "max_completion_tokens": given.max_output_tokens or compaction.budget(messages),
                "store": False,
            }
        )
        answer = await self._chat_answer(chat, False, [])
        assert isinstance(answer, ChatCompletion)
        assert answer.usage is not None
        summary = answer.choices[0].message.content or ""
        kept = {
            "id": items.new_item_id("cmp"),
            "type": "compaction",
            "encrypted_content": summary.strip(),
            "created_by": "modelport",
        }
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
        listed = list((await self._row(response_id))["input_items"])
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

    async def _run(
        self,
        chat: ChatCompletionRequest,
        request: ResponseRequest,
        response: ResponseObject,
        ended: _Ending,
        tools: ServerTools,
        client: ClientTools,
    ) -> AsyncGenerator[ResponseStreamEvent, None]:
        """The events of one turn; a stored turn is committed before its closing event goes out. An error
        before any output (an unknown model, a schema the decoder cannot enforce) is raised as it is.
        While the model calls tools the server runs, they run and the model is asked again (at most
        `max_tool_calls` calls, then it must answer)."""
        response.status = "in_progress"  # a background turn was queued until its job began this
        builder = ResponseEvents(
            response, client, tools.names, tools.annotate, _summarised(request), self._sealing(request)
        )
        opening = builder.start()
        if tools:
            async for event in tools.prepare(builder, ended.earlier, ended.turn):
                opening.append(event)
            tools.offer(chat, request.tool_choice)
            builder.hosted = tools.names
            chat.messages += _messages(answered(tools.approvals, None, tools.outputs))
            if tools.approvals and _forced(request):
                _answer_now(chat, tools.names)  # the approved call met the forced choice
        chunks = await self._chat_answer(chat, request.truncation == "auto", ended.turn)
        for event in opening:
            yield event
        spent = False
        try:
            ran = 0
            for round_number in range(1, _ROUNDS + 1):
                assert isinstance(chunks, Events)
                try:
                    async for chunk in chunks.items:
                        for event in builder.feed(chunk):
                            yield event
                finally:
                    await chunks.aclose()
                hosted = builder.hosted_calls()
                said = builder.fold.choice(0)["message"].get("content")
                if (
                    not hosted
                    or builder.client_calls()
                    or builder.fold.choice(0)["finish_reason"] == "length"
                ):
                    break
                for event in builder.next_round():
                    yield event
                for call in hosted:
                    async for event in tools.run(call, builder):
                        yield event
                ran += len(hosted)
                if tools.waiting:
                    break  # a call waits for the user's approval: the turn ends with the request
                chat.messages += _messages(answered(hosted, said, tools.outputs))
                # `max_output_tokens` bounds the whole response, every round together (OpenAI: "an upper
                # bound for the number of tokens that can be generated for a response").
                left = _tokens_left(request, response)
                if left is not None and left <= 0:
                    spent = True
                    break
                if left is not None:
                    chat.max_completion_tokens, chat.max_tokens = left, None
                # A tool choice that forced a call is met; after the last call allowed, the model answers.
                last = round_number + 1 == _ROUNDS or (request.max_tool_calls or _ROUNDS) <= ran
                if _forced(request) or last:
                    _answer_now(chat, tools.names)
                else:
                    chat.tool_choice = "auto"
                chunks = await self._chat(chat)
            cut = builder.fold.choice(0)["finish_reason"] == "length"
            closing = builder.finish(spent, [tools.unran(c) for c in builder.hosted_calls()] if cut else [])
        except ModelportError as error:
            closing = builder.fail(error.body()["error"])
        except BaseException:
            # The client left mid-stream (or the job was cancelled): what was produced is kept.
            builder.left(request.background)
            with anyio.CancelScope(shield=True):
                await self._finish(ended, response)
            raise
        for event in closing[:-1]:
            yield event
        await self._finish(ended, response)
        yield closing[-1]

    async def _chat_answer(
        self, chat: ChatCompletionRequest, truncate: bool, turn: list[dict[str, Any]]
    ) -> ChatCompletion | Events[ChatCompletion]:
        """The turn's chat answer (whole, or streamed as the request says); with `truncation: auto`, the
        oldest turns go until it fits. A 400 about a part of the turn's input names it as `input[i]…`."""
        try:
            for _ in range(_TRUNCATION_TRIES):
                try:
                    return await self._chat(chat)
                except InvalidRequestError as error:
                    if not truncate or error.code != "context_length_exceeded" or not _drop_oldest(chat):
                        raise
            return await self._chat(chat)
        except InvalidRequestError as error:
            _name_input(error, len(chat.messages), turn)
            raise

    async def _finish(self, ended: _Ending, response: ResponseObject) -> None:
        """Store the turn as it ended (a background one was stored when it was queued), and add it to its
        conversation if it made something."""
        row, stored = ended.row, response.to_dict(mode="json")
        if row is not None and row["background"]:
            await self._store().responses.settle(row["id"], stored, heartbeat=int(time.time()))
        elif row is not None:
            await self._store().responses.save({**row, "status": response.status, "response": stored})
        if ended.conversation is not None and response.status in ("completed", "incomplete"):
            made = ended.turn + items.output_items(stored)
            await self.conversations.append(ended.conversation, ended.project, made)

    def _chat_request(
        self,
        request: ResponseRequest,
        history: list[dict[str, Any]],
        turn: list[dict[str, Any]],
        stream: bool,
        tools: ServerTools,
        client: ClientTools,
    ) -> ChatCompletionRequest:
        chosen = request.tool_choice
        # A choice of a server-run tool is put in once the tools are known (`ServerTools.offer`).
        served = tools and isinstance(chosen, dict) and chosen.get("type") in SERVED
        fields = items.chat_fields(request, client, choice="auto" if served else None)
        messages = history + items.messages(turn)
        if (request.reasoning or {}).get("context") == "current_turn":
            messages = _this_turns_thinking(messages)
        return chat_request(
            request.model, request.instructions, messages, fields, stream=stream, param="input"
        )

    async def _history(self, previous: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Every earlier turn of the conversation, as chat messages; and those turns' responses."""
        turns, earlier = await self._earlier(previous)
        return [message for turn in turns for message in items.messages(turn)], earlier

    async def _earlier(self, previous: str | None) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
        """Every earlier turn's items (its input, then its output), oldest first; and their responses."""
        if previous is None:
            return [], []
        chain = await self._store().responses.chain(previous, context.current().project)
        if not chain:
            raise NotFoundError(
                f"Previous response with id '{previous}' not found.", param="previous_response_id"
            )
        if chain[0]["previous_response_id"] is not None:
            raise NotFoundError(
                f"The conversation of '{previous}' goes back to '{chain[0]['previous_response_id']}', "
                "which was deleted.",
                param="previous_response_id",
            )
        turns = [[*row["input_items"], *items.output_items(row["response"])] for row in chain]
        return turns, [row["response"] for row in chain]

    def _sealing(self, request: ResponseRequest) -> Callable[[str], str] | None:
        """How the turn's reasoning is sealed for the client, when it asks for it back
        (`include: ["reasoning.encrypted_content"]`)."""
        if "reasoning.encrypted_content" not in (request.include or []):
            return None
        if self.sealer is None:
            raise InvalidRequestError(
                "This server keeps no key to seal reasoning with.", param="include", code="unsupported_value"
            )
        return self.sealer.seal

    def _open_sealed(self, blob: str, param: str) -> str:
        if self.sealer is None:
            raise InvalidRequestError("This server keeps no key to open sealed reasoning with.", param=param)
        return self.sealer.open(blob, param)

    def _storing(self, request: ResponseRequest) -> bool:
        if self.store is None:
            for name, given in (
                ("store", request.store),
                ("previous_response_id", request.previous_response_id),
                ("background", request.background or None),
            ):
                if given:
                    raise StoreDisabledError(
                        f"{name} needs stored responses, and this server stores nothing (started with "
                        "--database none).",
                        param=name,
                    )
            return False
        if request.background and request.store is False:
            raise InvalidRequestError(
                "A background response must be stored (store: true).", param="background"
            )
        return request.store is not False

    def _store(self) -> Store:
        if self.store is None:
            raise StoreDisabledError("This server stores nothing (started with --database none).")
        return self.store

    async def _row(self, response_id: str) -> dict[str, Any]:
        row = await self._store().responses.get(response_id, context.current().project)
        if row is None:
            raise _missing(response_id)
        return row


def _messages(messages: list[dict[str, Any]]) -> list[ChatMessage]:
    return [ChatMessage.model_validate(message) for message in messages]


def _this_turns_thinking(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with the thinking of turns before the last user message left out
    (`reasoning.context: current_turn`)."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    return [
        {k: v for k, v in m.items() if k != "reasoning_content"} if i < last else m
        for i, m in enumerate(messages)
    ]


def _summarised(request: ResponseRequest) -> bool:
    """Whether the reasoning items carry a summary (`reasoning.summary`, or the older `generate_summary`)."""
    reasoning = request.reasoning or {}
    return bool(reasoning.get("summary") or reasoning.get("generate_summary"))


def _forced(request: ResponseRequest) -> bool:
    return request.tool_choice not in (None, "auto", "none")


def _tokens_left(request: ResponseRequest, response: Response) -> int | None:
    """What of the response's `max_output_tokens` the rounds so far have left (None: no bound asked)."""
    if request.max_output_tokens is None:
        return None
    return request.max_output_tokens - (response.usage.output_tokens if response.usage else 0)


def _answer_now(chat: ChatCompletionRequest, served: frozenset[str]) -> None:
    """The next round answers: the server-run tools are no longer offered (a model shown a tool it may
    not call tends to write the call as text)."""
    kept = [tool for tool in chat.tools or [] if (tool.get("function") or {}).get("name") not in served]
    chat.tools = kept or None
    chat.tool_choice = "none" if kept else None


def _skeleton(request: ResponseRequest, model_id: str, store: bool) -> ResponseObject:
    """The `Response` before any output: what every event's snapshot starts from. Its fields as the request
    gave them (checked as the `Response` type takes them)."""
    return ResponseObject.model_validate(
        {
            "id": items.new_item_id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            # Required in every snapshot (the OpenResponses specification), set at the end.
            "completed_at": None,
            "status": "queued" if request.background else "in_progress",
            "background": request.background,
            "error": None,
            "incomplete_details": None,
            "instructions": request.instructions,
            "max_output_tokens": request.max_output_tokens,
            "max_tool_calls": request.max_tool_calls,
            "model": model_id,
            "output": [],
            "parallel_tool_calls": request.parallel_tool_calls is not False,
            "previous_response_id": request.previous_response_id,
            # Echoed as asked (a model that does not think ignores it): effort, summary, and the fields
            # beside them (`context`, `mode`) as they were sent.
            "reasoning": {
                **{k: v for k, v in (request.reasoning or {}).items() if k != "generate_summary"},
                "effort": (request.reasoning or {}).get("effort"),
                "summary": (request.reasoning or {}).get("summary")
                or (request.reasoning or {}).get("generate_summary"),
            },
            "service_tier": "default",  # the tier used, as OpenAI echoes it: here there is one
            "store": store,
            "temperature": request.temperature if request.temperature is not None else 1.0,
            "presence_penalty": request.presence_penalty or 0.0,
            "frequency_penalty": request.frequency_penalty or 0.0,
            "text": _text_config(request.text),
            "tool_choice": request.tool_choice if request.tool_choice is not None else "auto",
            "tools": [with_defaults(tool) for tool in redacted(request.tools or [])],
            "top_logprobs": request.top_logprobs or 0,
            "top_p": request.top_p if request.top_p is not None else 1.0,
            "truncation": request.truncation or "disabled",
            "usage": None,
            "user": request.user,
            "metadata": request.metadata or {},
            "safety_identifier": request.safety_identifier,
            "prompt_cache_key": request.prompt_cache_key,
        }
    )


def _new_row(request: ResponseRequest, turn: list[dict[str, Any]], response: Response) -> dict[str, Any]:
    """The stored row of a turn, with its response as it starts."""
    return {
        "id": response.id,
        "created": int(response.created_at),
        "model": response.model,
        "status": response.status,
        "previous_response_id": request.previous_response_id,
        "background": request.background,
        "heartbeat": int(time.time()),
        "metadata": request.metadata or {},
        "request": {
            **request.model_dump(mode="json", exclude_unset=True, exclude={"input"}),
            "tools": [with_defaults(tool) for tool in redacted(request.tools or [])],
        },
        "input_items": turn,
        "response": response.to_dict(mode="json"),
        "project": context.current().project,
    }


@dataclass(frozen=True)
class _Ending:
    """What a turn's end writes: its stored row (if stored), its input, and its conversation (if any) with
    the project it belongs to (a job may end in another task); and the responses it continues."""

    row: dict[str, Any] | None
    turn: list[dict[str, Any]]
    conversation: str | None
    project: str
    earlier: list[dict[str, Any]]  # the responses the turn continues, oldest first


def _name_input(error: InvalidRequestError, sent: int, turn: list[dict[str, Any]]) -> None:
    """Rename `messages[k]…` in a chat error to the turn's `input[i]…` it came from: the turn's messages
    are the last ones sent (truncation drops the oldest)."""
    found = re.match(r"messages\[(\d+)\]", error.param or "")
    if found is None:
        return
    position = int(found[1]) - (sent - len(items.messages(turn)))
    for i, item in enumerate(turn):
        if item.get("type", "message") == "message" and len(items.messages(turn[: i + 1])) - 1 == position:
            named = f"input[{i}]"
            error.param = named + (error.param or "")[found.end() :]
            error.message = error.message.replace(found[0], named)
            return


def _conversation_id(given: str | dict[str, Any] | None) -> str | None:
    """`conversation` as an id or `{"id": …}`."""
    if given is None:
        return None
    found = given.get("id") if isinstance(given, dict) else given
    if not isinstance(found, str) or not found:
        raise InvalidRequestError('conversation must be an id or {"id": …}.', param="conversation")
    return found


def _text_config(given: dict[str, Any] | None) -> dict[str, Any]:
    """`text` as the response echoes it: its format (plain text unless given; a JSON schema's `description`
    and `strict` always there, as the specification requires them), and `verbosity` only where it was given
    (optional: absent, never null)."""
    text = {key: value for key, value in (given or {}).items() if value is not None}
    shown = {"format": {"type": "text"}, **text}
    if isinstance(shown["format"], dict) and shown["format"].get("type") == "json_schema":
        shown["format"] = {"description": None, "strict": False, **shown["format"]}
    return shown


def _response_of(response: dict[str, Any]) -> ResponseObject:
    return ResponseObject.model_validate(response)


def _drop_oldest(chat: ChatCompletionRequest) -> bool:
    """Drop the oldest message after the instructions (and the tool results that answer a dropped call);
    whether anything was left to drop."""
    first = 1 if chat.messages and chat.messages[0].role == "system" else 0
    if len(chat.messages) - first <= 1:
        return False
    del chat.messages[first]
    while len(chat.messages) > first + 1 and chat.messages[first].role == "tool":
        del chat.messages[first]
    return True


def _missing(response_id: str) -> NotFoundError:
    return NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
