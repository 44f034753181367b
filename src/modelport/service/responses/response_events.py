"""The Responses API's events, built as the `openai` package's event, item and `Response` types (so a field
a type requires cannot be left out, and a value it refuses fails where it is made): from a streamed turn's
chat chunks (folded as they pass by the one chat accumulator, so each item closes with its whole text or
arguments), or from a stored response's items (`replay`; `event_stream` has the stream as a whole).

The order is the one the openai SDK's stream helper checks: `response.created` first, every output item and
content part announced before its deltas, text events with `logprobs`, items closed before the response,
and a closing `response.completed` (or `response.incomplete` / `response.failed`); `sequence_number`
increases by one per event.
"""

from __future__ import annotations

import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from openai.types.responses import (
    ResponseCompactionCompactingEvent,
    ResponseCompactionItem,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseCustomToolCall,
    ResponseCustomToolCallInputDeltaEvent,
    ResponseCustomToolCallInputDoneEvent,
    ResponseError,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseOutputTextAnnotationAddedEvent,
    ResponseReasoningItem,
    ResponseReasoningSummaryPartAddedEvent,
    ResponseReasoningSummaryPartDoneEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningSummaryTextDoneEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseReasoningTextDoneEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseUsage,
)
from openai.types.responses.response import IncompleteDetails
from openai.types.responses.response_content_part_added_event import PartReasoningText as AddedReasoning
from openai.types.responses.response_content_part_done_event import PartReasoningText as DoneReasoning
from openai.types.responses.response_output_text import AnnotationFileCitation, Logprob
from openai.types.responses.response_output_text_annotation_added_event import (
    AnnotationFileCitation as AddedCitation,
)
from openai.types.responses.response_reasoning_summary_part_added_event import Part as AddedSummary
from openai.types.responses.response_reasoning_summary_part_done_event import Part as DoneSummary
from openai.types.responses.response_text_delta_event import Logprob as DeltaLogprob
from openai.types.responses.response_text_done_event import Logprob as DoneLogprob

from modelport.protocol.chunk_folds import ChatFold, thinking_of
from modelport.protocol.response_object import ResponseObject
from modelport.service.responses.client_tools import ClientTools
from modelport.service.responses.defined_tools import DefinedCall
from modelport.service.responses.items import new_item_id
from modelport.service.responses.output import (
    added_usage,
    logprob,
    message_item,
    reasoning_item,
    usage,
)

Ending = Literal["completed", "incomplete", "failed"]


class Place(TypedDict):
    """Where an event about an item is: its id, its place in the output, and the event's number."""

    item_id: str
    output_index: int
    sequence_number: int


@dataclass
class _Open:
    """The output item being written: a message from `start` in the answer's text (and its log-probabilities
    from `logprobs_start`), the reasoning from `start` in the answer's thinking, or the tool call at `call`
    in the answer's calls."""

    id: str
    output_index: int
    call: int | None = None
    call_id: str = ""
    start: int = 0
    logprobs_start: int = 0
    reasoning: bool = False
    custom: bool = False  # a custom tool's call: its input is told whole as it closes
    defined: bool = False  # a defined tool's call (`shell`, …): told whole, added and done, as it closes


class ResponseEvents:
    """The events of one response, as the `openai` package's event types, with `response` kept as their
    snapshot (`output` grows as items close). An event that carries an item carries it as it was then.

    A turn whose tools the server runs is several chat answers (rounds): the calls of `hosted` tools make
    no `function_call` items (the server runs them and adds their own items); `next_round` closes what a
    round wrote and starts folding the next; usage adds up over the rounds; `annotate` gives each message
    its annotations (citations) as it closes. The model's thinking is a `reasoning` item before what it led
    to, summarised as it closes when `summary`, and sealed for the client when `seal` is given."""

    def __init__(
        self,
        response: ResponseObject,
        client: ClientTools | None = None,
        hosted: frozenset[str] = frozenset(),
        annotate: Callable[[str], list[AnnotationFileCitation]] | None = None,
        summary: bool = False,
        seal: Callable[[str], str] | None = None,
    ) -> None:
        self.response = response
        self.client = client or ClientTools()
        self.sequence = 0
        self.fold = ChatFold()
        self.hosted = hosted
        self.annotate = annotate
        self.summary = summary
        self.seal = seal
        self._open: _Open | None = None
        self._earlier: ResponseUsage | None = None  # usage of the rounds before this one

    def start(self) -> list[ResponseStreamEvent]:
        """`response.created` and `response.in_progress`."""
        created = ResponseCreatedEvent(
            type="response.created", sequence_number=self._next(), response=self._snapshot()
        )
        going = ResponseInProgressEvent(
            type="response.in_progress", sequence_number=self._next(), response=self._snapshot()
        )
        return [created, going]

    def feed(self, chunk: dict[str, Any]) -> list[ResponseStreamEvent]:
        """The events of one chat chunk (as the chat path streams it)."""
        self.fold.add(chunk)
        if chunk.get("usage"):
            self.response.usage = added_usage(self._earlier, usage(chunk["usage"]))
        events: list[ResponseStreamEvent] = []
        for piece in chunk.get("choices") or []:
            delta = piece.get("delta") or {}
            said = thinking_of(delta)
            if said:
                events += self._reasoning(said)
            text = delta.get("content")
            if text:
                tokens = [logprob(e) for e in (piece.get("logprobs") or {}).get("content") or []]
                events += self._text(text, tokens)
            for call in delta.get("tool_calls") or []:
                events += self._call(call)
        return events

    def hosted_calls(self) -> list[dict[str, Any]]:
        """This round's calls of tools the server runs (whole: `id`, `function.name`, `.arguments`)."""
        calls = self.fold.choice(0)["message"].get("tool_calls") or []
        return [c for c in calls if (c.get("function") or {}).get("name") in self.hosted]

    def client_calls(self) -> bool:
        """Whether this round called a function the client runs (the turn then ends with it)."""
        calls = self.fold.choice(0)["message"].get("tool_calls") or []
        return any((c.get("function") or {}).get("name") not in self.hosted for c in calls)

    def next_round(self) -> list[ResponseStreamEvent]:
        """Close what this round wrote; the next chat answer folds afresh."""
        events = self._close(False)
        self.fold = ChatFold()
        self._earlier = self.response.usage
        return events

    def add_item(self, item: ResponseOutputItem) -> list[ResponseStreamEvent]:
        """`response.output_item.added` for an item the server makes (a tool call it runs)."""
        return [self._added(len(self.response.output), item)]

    def at(self, item: ResponseOutputItem) -> Place:
        """The place of the item being made, for an event about it (`response.file_search_call.searching`,
        …), numbered."""
        assert item.id is not None
        return Place(item_id=item.id, output_index=len(self.response.output), sequence_number=self._next())

    def done_item(self, item: ResponseOutputItem) -> list[ResponseStreamEvent]:
        """The item made: `response.output_item.done`, and it joins the output."""
        index = len(self.response.output)
        self.response.output.append(item)
        return [self._done(index, item)]

    def compacting(self, item_id: str) -> list[ResponseStreamEvent]:
        """The compaction item the server begins (its summary still empty): `response.output_item.added`
        and `response.compaction.compacting`."""
        index = len(self.response.output)
        begun = ResponseCompactionItem(id=item_id, type="compaction", encrypted_content="")
        added = self._added(index, begun)
        told = ResponseCompactionCompactingEvent(
            type="response.compaction.compacting", item_id=item_id, output_index=index,
            sequence_number=self._next(),
        )  # fmt: skip
        return [added, told]

    def compacted(self, item: ResponseCompactionItem, spent: ResponseUsage) -> list[ResponseStreamEvent]:
        """The compaction item made (`response.output_item.done`); the tokens its summary took count in the
        response's usage, before those of the rounds after it."""
        self.response.usage = self._earlier = added_usage(self._earlier, spent)
        return self.done_item(item)

    def finish(
        self, spent: bool = False, unran: list[ResponseOutputItem] | None = None
    ) -> list[ResponseStreamEvent]:
        """Close the open item, then `response.completed` (or `.incomplete` when cut by the token budget, or
        when the budget was `spent` by earlier rounds before the model could answer). `unran`: the items of
        server-run calls the budget cut while the model wrote them (never run, `incomplete`)."""
        cut = spent or self.fold.choice(0)["finish_reason"] == "length"
        events = self._close(cut)
        for item in unran or []:
            events += self.add_item(item) + self.done_item(item)
        self.response.completed_at = int(time.time())
        if cut:
            self.response.status = "incomplete"
            self.response.incomplete_details = IncompleteDetails(reason="max_output_tokens")
            return [*events, self.ending("incomplete")]
        self.response.status = "completed"
        return [*events, self.ending("completed")]

    def fail(self, error: dict[str, Any]) -> list[ResponseStreamEvent]:
        """Close what was produced and end with `response.failed`; `error` as the error body says it
        (`message`, `type`, `code`)."""
        events = self._close(True)
        self.response.status = "failed"
        self.response.error = _response_error(error)
        return [*events, self.ending("failed")]

    def left(self, background: bool) -> None:
        """Close what was produced when the client left mid-stream (or a background job was cancelled): the
        response is `cancelled` if it ran in the background, else `incomplete`, with no reason given (none
        of those the `Response` type knows is a client that left)."""
        self._close(True)
        self.response.status = "cancelled" if background else "incomplete"

    def ending(self, status: Ending) -> ResponseStreamEvent:
        """The closing event of the response as it is now."""
        number, response = self._next(), self._snapshot()
        if status == "failed":
            return ResponseFailedEvent(type="response.failed", sequence_number=number, response=response)
        if status == "incomplete":
            return ResponseIncompleteEvent(
                type="response.incomplete", sequence_number=number, response=response
            )
        return ResponseCompletedEvent(type="response.completed", sequence_number=number, response=response)

    def replay(self, item: ResponseOutputItem) -> list[ResponseStreamEvent]:
        """The events that stream a stored output item whole."""
        index = len(self.response.output)
        if isinstance(item, ResponseOutputMessage) and isinstance(item.content[0], ResponseOutputText):
            part = item.content[0]
            events = self._open_message(item.id, index)
            events.append(self._text_delta(item.id, index, part.text, part.logprobs or []))
            return events + self._close_message(item, part)
        if isinstance(item, ResponseReasoningItem) and item.content:
            events = self._open_reasoning(item.id, index)
            events.append(self._reasoning_delta(item.id, index, item.content[0].text))
            return events + self._close_reasoning(item)
        if isinstance(item, ResponseFunctionToolCall):
            assert item.id is not None
            events = [self._added(index, item.model_copy(update={"status": "in_progress", "arguments": ""}))]
            events.append(self._arguments_delta(item.id, index, item.arguments))
            return events + self._close_call(item)
        if isinstance(item, ResponseCustomToolCall):
            return [self._added(index, item.model_copy(update={"input": ""})), *self._close_call(item)]
        return self.add_item(item) + self.done_item(item)

    def _text(self, text: str, tokens: list[Logprob]) -> list[ResponseStreamEvent]:
        events: list[ResponseStreamEvent] = []
        if self._open is None or self._open.call is not None or self._open.reasoning:
            events += self._close(False)
            choice = self.fold.choice(0)  # this chunk is in it already
            written = len(choice["message"].get("content") or "") - len(text)
            scored = len((choice.get("logprobs") or {}).get("content") or []) - len(tokens)
            self._open = _Open(
                new_item_id("msg"), len(self.response.output), start=written, logprobs_start=scored
            )
            events += self._open_message(self._open.id, self._open.output_index)
        events.append(self._text_delta(self._open.id, self._open.output_index, text, tokens))
        return events

    def _reasoning(self, text: str) -> list[ResponseStreamEvent]:
        events: list[ResponseStreamEvent] = []
        if self._open is None or not self._open.reasoning:
            events += self._close(False)
            written = len(thinking_of(self.fold.choice(0)["message"]) or "") - len(text)
            self._open = _Open(new_item_id("rs"), len(self.response.output), start=written, reasoning=True)
            events += self._open_reasoning(self._open.id, self._open.output_index)
        return [*events, self._reasoning_delta(self._open.id, self._open.output_index, text)]

    def _open_reasoning(self, item_id: str, index: int) -> list[ResponseStreamEvent]:
        """A reasoning item announced, empty, and its text part begun."""
        item = ResponseReasoningItem(
            id=item_id, type="reasoning", status="in_progress", summary=[], content=[]
        )
        part_added = ResponseContentPartAddedEvent(
            type="response.content_part.added", item_id=item_id, output_index=index, content_index=0,
            part=AddedReasoning(type="reasoning_text", text=""), sequence_number=self._next(),
        )  # fmt: skip
        return [self._added(index, item), part_added]

    def _reasoning_delta(self, item_id: str, index: int, text: str) -> ResponseStreamEvent:
        return ResponseReasoningTextDeltaEvent(
            type="response.reasoning_text.delta", item_id=item_id, output_index=index, content_index=0,
            delta=text, sequence_number=self._next(),
        )  # fmt: skip

    def _call(self, delta: dict[str, Any]) -> list[ResponseStreamEvent]:
        events: list[ResponseStreamEvent] = []
        index = delta.get("index", 0)
        if (self._whole_call(index).get("function") or {}).get("name") in self.hosted:
            return []  # the server runs it: its own item comes when it does
        if self._open is None or self._open.call != index:
            events += self._close(False)
            item = self.client.item(new_item_id("fc"), self._whole_call(index), "in_progress")
            assert item.id is not None
            custom = isinstance(item, ResponseCustomToolCall)
            defined = not isinstance(item, ResponseCustomToolCall | ResponseFunctionToolCall)
            self._open = _Open(
                item.id, len(self.response.output), index, item.call_id, custom=custom, defined=defined
            )
            if not defined:  # (a defined call's action is known only whole)
                emptied = {"input": ""} if custom else {"arguments": ""}
                events.append(self._added(self._open.output_index, item.model_copy(update=emptied)))
        arguments = (delta.get("function") or {}).get("arguments")
        if arguments and not (self._open.custom or self._open.defined):  # told whole as they close
            events.append(self._arguments_delta(self._open.id, self._open.output_index, arguments))
        return events

    def _close(self, cut: bool) -> list[ResponseStreamEvent]:
        """Close the open item, whole as the fold has it."""
        opened, self._open = self._open, None
        if opened is None:
            return []
        status: Literal["completed", "incomplete"] = "incomplete" if cut else "completed"
        if opened.reasoning:
            text = (thinking_of(self.fold.choice(0)["message"]) or "")[opened.start :]
            sealed = self.seal(text) if self.seal is not None else None
            return self._close_reasoning(reasoning_item(opened.id, text, status, self.summary, sealed))
        if opened.call is not None:
            call = {**self._whole_call(opened.call), "id": opened.call_id}
            return self._close_call(self.client.item(opened.id, call, status))
        choice = self.fold.choice(0)
        text = (choice["message"].get("content") or "")[opened.start :]
        tokens = ((choice.get("logprobs") or {}).get("content") or [])[opened.logprobs_start :]
        item = message_item(opened.id, text, [logprob(e) for e in tokens], status)
        part = item.content[0]
        assert isinstance(part, ResponseOutputText)
        events: list[ResponseStreamEvent] = []
        for number, annotation in enumerate(self.annotate(text) if self.annotate else []):
            part.annotations.append(annotation)
            events.append(
                ResponseOutputTextAnnotationAddedEvent(
                    type="response.output_text.annotation.added", item_id=opened.id,
                    output_index=opened.output_index, content_index=0, annotation_index=number,
                    annotation=AddedCitation.model_validate(annotation.to_dict()),
                    sequence_number=self._next(),
                )
            )  # fmt: skip
        return events + self._close_message(item, part)

    def _close_reasoning(self, item: ResponseReasoningItem) -> list[ResponseStreamEvent]:
        """The thinking's text done, its summary (when asked) as a part of its own, then the item."""
        index = len(self.response.output)
        text = item.content[0].text if item.content else ""
        events: list[ResponseStreamEvent] = [
            ResponseReasoningTextDoneEvent(
                type="response.reasoning_text.done", item_id=item.id, output_index=index, content_index=0,
                text=text, sequence_number=self._next(),
            ),
            ResponseContentPartDoneEvent(
                type="response.content_part.done", item_id=item.id, output_index=index, content_index=0,
                part=DoneReasoning(type="reasoning_text", text=text), sequence_number=self._next(),
            ),
        ]  # fmt: skip
        for number, part in enumerate(item.summary):
            events += [
                ResponseReasoningSummaryPartAddedEvent(
                    type="response.reasoning_summary_part.added", item_id=item.id, output_index=index,
                    summary_index=number,
                    part=AddedSummary(type="summary_text", text=""), sequence_number=self._next(),
                ),
                ResponseReasoningSummaryTextDeltaEvent(
                    type="response.reasoning_summary_text.delta", item_id=item.id, output_index=index,
                    summary_index=number, delta=part.text,
                    sequence_number=self._next(),
                ),
                ResponseReasoningSummaryTextDoneEvent(
                    type="response.reasoning_summary_text.done", item_id=item.id, output_index=index,
                    summary_index=number, text=part.text,
                    sequence_number=self._next(),
                ),
                ResponseReasoningSummaryPartDoneEvent(
                    type="response.reasoning_summary_part.done", item_id=item.id, output_index=index,
                    summary_index=number,
                    part=DoneSummary(type="summary_text", text=part.text), sequence_number=self._next(),
                ),
            ]  # fmt: skip
        self.response.output.append(item)
        return [*events, self._done(index, item)]

    def _whole_call(self, index: int) -> dict[str, Any]:
        calls = self.fold.choice(0)["message"].get("tool_calls") or []
        return next((c for c in calls if c.get("index") == index), {})

    def _open_message(self, item_id: str, index: int) -> list[ResponseStreamEvent]:
        item = ResponseOutputMessage(
            id=item_id, type="message", status="in_progress", role="assistant", content=[]
        )
        added = self._added(index, item)
        part = ResponseOutputText(type="output_text", text="", annotations=[], logprobs=[])
        part_added = ResponseContentPartAddedEvent(
            type="response.content_part.added", item_id=item_id, output_index=index, content_index=0,
            part=part, sequence_number=self._next(),
        )  # fmt: skip
        return [added, part_added]

    def _text_delta(self, item_id: str, index: int, text: str, tokens: list[Logprob]) -> ResponseStreamEvent:
        return ResponseTextDeltaEvent(
            type="response.output_text.delta", item_id=item_id, output_index=index, content_index=0,
            delta=text, logprobs=_as(DeltaLogprob, tokens), sequence_number=self._next(),
        )  # fmt: skip

    def _close_message(
        self, item: ResponseOutputMessage, part: ResponseOutputText
    ) -> list[ResponseStreamEvent]:
        index = len(self.response.output)
        self.response.output.append(item)
        text_done = ResponseTextDoneEvent(
            type="response.output_text.done", item_id=item.id, output_index=index, content_index=0,
            text=part.text, logprobs=_as(DoneLogprob, part.logprobs or []), sequence_number=self._next(),
        )  # fmt: skip
        part_done = ResponseContentPartDoneEvent(
            type="response.content_part.done", item_id=item.id, output_index=index, content_index=0,
            part=part.model_copy(), sequence_number=self._next(),
        )  # fmt: skip
        return [text_done, part_done, self._done(index, item)]

    def _arguments_delta(self, item_id: str, index: int, arguments: str) -> ResponseStreamEvent:
        return ResponseFunctionCallArgumentsDeltaEvent(
            type="response.function_call_arguments.delta", item_id=item_id, output_index=index,
            delta=arguments, sequence_number=self._next(),
        )  # fmt: skip

    def _close_call(
        self, item: ResponseFunctionToolCall | ResponseCustomToolCall | DefinedCall
    ) -> list[ResponseStreamEvent]:
        index = len(self.response.output)
        self.response.output.append(item)
        assert item.id is not None
        if not isinstance(item, ResponseCustomToolCall | ResponseFunctionToolCall):
            opening = item.model_copy(update={"status": "in_progress"})
            return [self._added(index, opening), self._done(index, item)]
        if isinstance(item, ResponseCustomToolCall):
            delta = ResponseCustomToolCallInputDeltaEvent(
                type="response.custom_tool_call_input.delta", item_id=item.id, output_index=index,
                delta=item.input, sequence_number=self._next(),
            )  # fmt: skip
            done = ResponseCustomToolCallInputDoneEvent(
                type="response.custom_tool_call_input.done", item_id=item.id, output_index=index,
                input=item.input, sequence_number=self._next(),
            )  # fmt: skip
            return [delta, done, self._done(index, item)]
        # With the function's `name`, as OpenAI's API reference has it (openai's type keeps it as an extra).
        arguments_done = ResponseFunctionCallArgumentsDoneEvent.model_validate(
            {
                "type": "response.function_call_arguments.done", "item_id": item.id, "output_index": index,
                "arguments": item.arguments, "name": item.name, "sequence_number": self._next(),
            }
        )  # fmt: skip
        return [arguments_done, self._done(index, item)]

    def _added(self, index: int, item: ResponseOutputItem) -> ResponseStreamEvent:
        return ResponseOutputItemAddedEvent(
            type="response.output_item.added", output_index=index, item=item.model_copy(),
            sequence_number=self._next(),
        )  # fmt: skip

    def _done(self, index: int, item: ResponseOutputItem) -> ResponseStreamEvent:
        return ResponseOutputItemDoneEvent(
            type="response.output_item.done", output_index=index, item=item, sequence_number=self._next()
        )

    def _snapshot(self) -> ResponseObject:
        """The response as it is now: its output as closed so far."""
        return self.response.model_copy(update={"output": list(self.response.output)})

    def _next(self) -> int:
        number = self.sequence
        self.sequence += 1
        return number


# The codes a Response's `error` may carry (the SDK's type refuses any other, and its client then retries).
_ERROR_CODES = frozenset(typing.get_args(ResponseError.model_fields["code"].annotation))


def _response_error(error: dict[str, Any]) -> ResponseError:
    """The Responses error for an error body that ended a turn: its code where the type has it; a request
    the model cannot take (its context overflowed by a tool's output, a bad value) is `invalid_prompt`;
    anything else `server_error`. The message keeps what happened."""
    code = str(error.get("code") or "")
    if code not in _ERROR_CODES:
        code = "invalid_prompt" if error.get("type") == "invalid_request_error" else "server_error"
    return ResponseError.model_validate({"code": code, "message": error["message"]})


_Token = typing.TypeVar("_Token", DeltaLogprob, DoneLogprob)


def _as(kind: type[_Token], tokens: list[Logprob]) -> list[_Token]:
    """An output text's log-probabilities as a text event's type carries them (with their `bytes`)."""
    return [kind.model_validate(token.to_dict()) for token in tokens]
