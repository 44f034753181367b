"""One Responses turn run: the chat request it stands for, its chat answer (the oldest turns dropped
until it fits, with `truncation: auto`), and its events, round after round while the model calls tools
the server runs; the turn stored as it ends, before its closing event goes out."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol

import anyio
from openai.types.chat import ChatCompletion
from openai.types.responses import (
    Response,
    ResponseCompactionItem,
    ResponseStreamEvent,
    ToolChoiceAllowed,
)

from modelport.errors import InvalidRequestError, ModelportError
from modelport.protocol.answers import Events
from modelport.protocol.requests import ChatCompletionRequest, ChatMessage
from modelport.protocol.response_object import ResponseObject
from modelport.protocol.response_request import ResponseRequest
from modelport.service.generation.tools.flat import chat_request
from modelport.service.responses import compaction, items, sent_names
from modelport.service.responses.client_tools import ClientTools
from modelport.service.responses.compaction import Compacting
from modelport.service.responses.output import usage
from modelport.service.responses.response_events import ResponseEvents
from modelport.service.responses.sealing import Sealer
from modelport.service.responses.server_tools import ServerTools, answered
from modelport.service.responses.storing import Ending, StoredTurns

_TRUNCATION_TRIES = 8  # `truncation: auto` drops the oldest turn this many times at most
_ROUNDS = 8  # chat answers in one turn at most: the last one may not call a server-run tool


class ChatAnswers(Protocol):
    """What a turn asks of the service: a chat completion, whole or streamed as the request says,
    admitted and metered as any other."""

    async def chat_completion(
        self, request: ChatCompletionRequest
    ) -> ChatCompletion | Events[ChatCompletion]: ...


class TurnLoop:
    """Runs turns on the chat models `models` serves, storing each in `stored` as it ends; `sealer` seals
    the reasoning a client asks back and opens what it gives back."""

    def __init__(self, models: ChatAnswers, stored: StoredTurns, sealer: Sealer | None) -> None:
        self.models, self.stored, self.sealer = models, stored, sealer

    async def events(
        self,
        chat: ChatCompletionRequest,
        request: ResponseRequest,
        response: ResponseObject,
        ended: Ending,
        tools: ServerTools,
        client: ClientTools,
        compacting: Compacting | None = None,
    ) -> AsyncGenerator[ResponseStreamEvent, None]:
        """The events of one turn; a stored turn is committed before its closing event goes out. An error
        before any output (an unknown model, a schema the decoder cannot enforce) is raised as it is.
        While the model calls tools the server runs, they run and the model is asked again (at most
        `max_tool_calls` calls, then it must answer). A turn that `compacting` says crossed its threshold
        (or does not fit) compacts its context first: the compaction item, then the answer from it; and
        so does a round the tools' results took there."""
        response.status = "in_progress"  # a background turn was queued until its job began this
        builder = ResponseEvents(
            response, client, tools.names, tools.annotate, summarised(request), self.sealing(request)
        )
        opening = builder.start()
        approved: list[dict[str, Any]] = []  # the messages of the calls the user approved, run now
        if tools:
            async for event in tools.prepare(builder, ended.earlier, ended.turn):
                opening.append(event)
            tools.offer(chat, request.tool_choice)
            builder.hosted = tools.names
            approved = answered(tools.approvals, None, tools.outputs)
            chat.messages += _messages(approved)
            if tools.approvals and _forced(request):
                _answer_now(chat, tools.names)  # the approved call met the forced choice
        truncate = request.truncation == "auto"
        early = compacting if compacting is not None and compacting.first else None
        chunks = await self._unless_compacting(
            chat, early, lambda: self.answer(chat, request, truncate and early is None, ended.turn)
        )
        # What a compaction between rounds would summarise: the context, the turn and its rounds so far.
        covered = [*compacting.covered, *approved] if compacting is not None else []
        for event in opening:
            yield event
        spent = False
        try:
            if chunks is None:  # the context is compacted first
                assert compacting is not None
                async for event in self._compact(chat, request, builder, compacting):
                    yield event
                if not compacting.only:
                    turn = self._go_on_compacted(chat, request, builder, compacting, tools, client)
                    chat.messages += _messages(approved)
                    covered = [*items.messages(turn), *approved]
                    chunks = await self.answer(chat, request, truncate, turn)
            ran = 0
            for round_number in range(1, _ROUNDS + 1):
                if chunks is None:
                    break  # the turn only compacted
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
                ran_now = answered(hosted, said, tools.outputs)
                chat.messages += _messages(ran_now)
                covered += ran_now
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
                chunks = await self._unless_compacting(
                    chat, compacting, lambda: self.models.chat_completion(chat)
                )
                if chunks is None:  # the tools' results took the turn past its threshold (or its size)
                    assert compacting is not None
                    midway = replace(compacting, covered=covered)
                    async for event in self._compact(chat, request, builder, midway):
                        yield event
                    turn = self._go_on_compacted(chat, request, builder, compacting, tools, client)
                    covered = items.messages(turn)
                    chunks = await self.models.chat_completion(chat)
            cut = builder.fold.choice(0)["finish_reason"] == "length"
            closing = builder.finish(spent, [tools.unran(c) for c in builder.hosted_calls()] if cut else [])
        except ModelportError as error:
            closing = builder.fail(error.body()["error"])
        except BaseException:
            # The client left mid-stream (or the job was cancelled): what was produced is kept.
            builder.left(request.background)
            with anyio.CancelScope(shield=True):
                await self.stored.finish(ended, response)
            raise
        for event in closing[:-1]:
            yield event
        await self.stored.finish(ended, response)
        yield closing[-1]

    async def answer(
        self,
        chat: ChatCompletionRequest,
        request: ResponseRequest,
        truncate: bool,
        turn: list[dict[str, Any]],
    ) -> ChatCompletion | Events[ChatCompletion]:
        """The turn's chat answer (whole, or streamed as the request says); when `truncate`, the oldest turns
        go until it fits. A 400 names what `request` sent (`input[i]…`, `instructions`), not the chat's."""
        try:
            for _ in range(_TRUNCATION_TRIES):
                try:
                    return await self.models.chat_completion(chat)
                except InvalidRequestError as error:
                    if not truncate or error.code != "context_length_exceeded" or not _drop_oldest(chat):
                        raise
            return await self.models.chat_completion(chat)
        except InvalidRequestError as error:
            sent_names.name_as_sent(error, chat, turn, request)
            raise

    async def summary(
        self, model: str, covered: list[dict[str, Any]], instructions: str | None, limit: int | None = None
    ) -> ChatCompletion:
        """The chat model's summary of the conversation `covered` (chat messages), greedy, in at most
        `limit` tokens (else `compaction.budget`'s); a transcript the model cannot read whole is read from
        its later lines."""
        said = compaction.transcript(covered)
        while True:
            chat = ChatCompletionRequest.model_validate(
                {
                    "model": model,
                    "messages": [{"role": "user", "content": compaction.prompt(said, instructions)}],
                    "temperature": 0,
                    "max_completion_tokens": limit or compaction.budget(covered),
                    "store": False,
                }
            )
            try:
                answer = await self.models.chat_completion(chat)
            except InvalidRequestError as error:
                shorter = compaction.shortened(said) if error.code == "context_length_exceeded" else None
                if shorter is None:
                    raise
                said = shorter
                continue
            assert isinstance(answer, ChatCompletion)
            return answer

    async def _unless_compacting(
        self,
        chat: ChatCompletionRequest,
        compacting: Compacting | None,
        answer: Callable[[], Awaitable[ChatCompletion | Events[ChatCompletion]]],
    ) -> ChatCompletion | Events[ChatCompletion] | None:
        """The chat's `answer()`; None where the turn compacts first (`compacting` says it crossed its
        threshold, or the model finds the context does not fit)."""
        if compacting is not None and await self._crossed(chat, compacting):
            return None
        try:
            return await answer()
        except InvalidRequestError as error:
            if compacting is None or error.code != "context_length_exceeded":
                raise
            return None

    async def _crossed(self, chat: ChatCompletionRequest, compacting: Compacting) -> bool:
        """Whether the turn compacts before it answers: a trigger always; a threshold once the prompt
        reaches it, counted by the model itself (the prompt read and one token made: the conversation
        cache keeps what was read for the answer) where its size says it may; without a threshold, not
        yet (only once the answer finds the context does not fit)."""
        if compacting.only:
            return True
        if compacting.threshold is None or not compaction.may_cross(chat, compacting.threshold):
            return False
        counting = chat.model_copy(
            deep=True,
            update={"stream": False, "stream_options": None, "max_completion_tokens": 1, "max_tokens": None},
        )
        counting.n, counting.logprobs, counting.top_logprobs = 1, None, None
        try:
            answer = await self.models.chat_completion(counting)
        except InvalidRequestError as error:
            if error.code == "context_length_exceeded":
                return True
            raise
        assert isinstance(answer, ChatCompletion)
        assert answer.usage is not None
        return answer.usage.prompt_tokens >= compacting.threshold

    async def _compact(
        self,
        chat: ChatCompletionRequest,
        request: ResponseRequest,
        builder: ResponseEvents,
        compacting: Compacting,
    ) -> AsyncGenerator[ResponseStreamEvent, None]:
        """The compaction item's events, its summary made between them."""
        item_id = items.new_item_id("cmp")
        for event in builder.compacting(item_id):
            yield event
        limit = compaction.budget(compacting.covered, users_kept=False)
        answer = await self.summary(chat.model, compacting.covered, request.instructions, limit)
        assert answer.usage is not None
        said = (answer.choices[0].message.content or "").strip()
        made = ResponseCompactionItem.model_validate(compaction.item(item_id, said))
        for event in builder.compacted(made, usage(answer.usage.model_dump(exclude_unset=True))):
            yield event

    @staticmethod
    def _go_on_compacted(
        chat: ChatCompletionRequest,
        request: ResponseRequest,
        builder: ResponseEvents,
        compacting: Compacting,
        tools: ServerTools,
        client: ClientTools,
    ) -> list[dict[str, Any]]:
        """Make the turn's chat read the compaction item just made and the input items the turn keeps,
        instead of all that came before; those items."""
        turn = [builder.response.output[-1].to_dict(mode="json"), *compacting.kept]
        chat.messages = turn_chat(request, [], turn, True, tools, client).messages
        return turn

    def sealing(self, request: ResponseRequest) -> Callable[[str], str] | None:
        """How the turn's reasoning is sealed for the client, when it asks for it back
        (`include: ["reasoning.encrypted_content"]`)."""
        if "reasoning.encrypted_content" not in (request.include or []):
            return None
        if self.sealer is None:
            raise InvalidRequestError(
                "This server keeps no key to seal reasoning with.", param="include", code="unsupported_value"
            )
        return self.sealer.seal

    def open_sealed(self, blob: str, param: str) -> str:
        if self.sealer is None:
            raise InvalidRequestError("This server keeps no key to open sealed reasoning with.", param=param)
        return self.sealer.open(blob, param)


def turn_chat(
    request: ResponseRequest,
    history: list[dict[str, Any]],
    turn: list[dict[str, Any]],
    stream: bool,
    tools: ServerTools,
    client: ClientTools,
) -> ChatCompletionRequest:
    # A choice the server's tools decide is put in once they are known (`ServerTools.offer`).
    fields = items.chat_fields(request, client, choice="auto" if tools.decides(request.tool_choice) else None)
    messages = history + items.messages(turn)
    if request.reasoning is not None and request.reasoning.context == "current_turn":
        messages = _this_turns_thinking(messages)
    return chat_request(request.model, request.instructions, messages, fields, stream=stream, param="input")


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


def summarised(request: ResponseRequest) -> bool:
    """Whether the reasoning items carry a summary (`reasoning.summary`, or the older `generate_summary`)."""
    return request.reasoning is not None and request.reasoning.summary_asked() is not None


def _forced(request: ResponseRequest) -> bool:
    """Whether the tool choice makes the model call a tool: `required`, one named, or `allowed_tools` whose
    mode is `required`."""
    if isinstance(request.tool_choice, ToolChoiceAllowed):
        return request.tool_choice.mode == "required"
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
