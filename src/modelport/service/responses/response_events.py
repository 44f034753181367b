"""The Responses API's typed events: built from a streamed turn's chat chunks (folded as they pass by the one
chat accumulator, so each item closes with its whole text or arguments), or replayed from a stored
response's items.

The order is the one the openai SDK's stream helper checks: `response.created` first, every output item and
content part announced before its deltas, text events with `logprobs`, items closed before the response,
and a closing `response.completed` (or `response.incomplete` / `response.failed`); `sequence_number`
increases by one per event.
"""

from __future__ import annotations

import time
import typing
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from openai._models import construct_type
from openai.types.responses import Response, ResponseError, ResponseStreamEvent

from modelport.protocol.answers import EventKind, LastEvent
from modelport.service.generation.accumulate import ChatFold
from modelport.service.responses.items import new_item_id
from modelport.service.responses.output import call_item, logprob, message_item, usage


class _Snapshot(LastEvent):
    """The response a stream of Responses events makes: the one its last lifecycle event carries."""

    def add(self, event: dict[str, Any]) -> None:
        if "response" in event:
            self.last = event["response"]


RESPONSE_EVENTS: EventKind[Response] = EventKind(
    "response",
    fold=_Snapshot,
    event=lambda data: construct_type(type_=ResponseStreamEvent, value=data),
    whole=Response.model_validate,
    named=True,
)


@dataclass
class _Open:
    """The output item being written: a message from `start` in the answer's text (and its log-probabilities
    from `logprobs_start`), or the tool call at `call` in the answer's calls."""

    id: str
    output_index: int
    call: int | None = None
    call_id: str = ""
    start: int = 0
    logprobs_start: int = 0


class ResponseEvents:
    """The events of one response, with `response` kept as their snapshot (`output` grows as items close).

    A turn whose tools the server runs is several chat answers (rounds): the calls of `hosted` tools make
    no `function_call` items (the server runs them and adds their own items); `next_round` closes what a
    round wrote and starts folding the next; usage adds up over the rounds; `annotate` gives each message
    its annotations (citations) as it closes."""

    def __init__(
        self,
        response: dict[str, Any],
        hosted: frozenset[str] = frozenset(),
        annotate: Callable[[str], list[dict[str, Any]]] | None = None,
    ) -> None:
        self.response = response
        self.sequence = 0
        self.fold = ChatFold()
        self.hosted = hosted
        self.annotate = annotate
        self._open: _Open | None = None
        self._earlier: dict[str, Any] | None = None  # usage of the rounds before this one

    def start(self) -> list[dict[str, Any]]:
        """`response.created` and `response.in_progress`."""
        return [self._lifecycle("response.created"), self._lifecycle("response.in_progress")]

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """The events of one chat chunk."""
        self.fold.add(chunk)
        if chunk.get("usage"):
            self.response["usage"] = _added_usage(self._earlier, usage(chunk["usage"]))
        events: list[dict[str, Any]] = []
        for piece in chunk.get("choices") or []:
            delta = piece.get("delta") or {}
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

    def next_round(self) -> list[dict[str, Any]]:
        """Close what this round wrote; the next chat answer folds afresh."""
        events = self._close(False)
        self.fold = ChatFold()
        self._earlier = self.response.get("usage")
        return events

    def add_item(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        """`response.output_item.added` for an item the server makes (a tool call it runs)."""
        return [self._added(len(self.response["output"]), item)]

    def item_event(self, kind: str, item: dict[str, Any], **fields: Any) -> dict[str, Any]:
        """An event about the item being made (`response.file_search_call.searching`, …)."""
        return self._event(kind, item_id=item["id"], output_index=len(self.response["output"]), **fields)

    def done_item(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        """The item made: `response.output_item.done`, and it joins the output."""
        index = len(self.response["output"])
        self.response["output"].append(item)
        return [self._event("response.output_item.done", output_index=index, item=item)]

    def finish(self, spent: bool = False, unran: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Close the open item, then `response.completed` (or `.incomplete` when cut by the token budget, or
        when the budget was `spent` by earlier rounds before the model could answer). `unran`: the items of
        server-run calls the budget cut while the model wrote them (never run, `incomplete`)."""
        cut = spent or self.fold.choice(0)["finish_reason"] == "length"
        events = self._close(cut)
        for item in unran or []:
            events += self.add_item(item) + self.done_item(item)
        self.response["completed_at"] = int(time.time())
        if cut:
            self.response.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
            return [*events, self._lifecycle("response.incomplete")]
        self.response["status"] = "completed"
        return [*events, self._lifecycle("response.completed")]

    def fail(self, error: dict[str, Any], status: str = "failed") -> list[dict[str, Any]]:
        """Close what was produced and end with `response.failed` (or mark it `incomplete`/`cancelled`)."""
        events = self._close(True)
        self.response["status"] = status
        if status == "failed":
            self.response["error"] = {"code": _error_code(error), "message": error["message"]}
            return [*events, self._lifecycle("response.failed")]
        if status == "incomplete":
            self.response["incomplete_details"] = {"reason": "interrupted"}
            return [*events, self._lifecycle("response.incomplete")]
        return events

    def replay(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        """The events that stream a stored output item whole."""
        index = len(self.response["output"])
        if item.get("type") == "message":
            part = (item.get("content") or [{}])[0]
            events = self._open_message(item["id"], index)
            events.append(
                self._text_delta(item["id"], index, part.get("text", ""), part.get("logprobs") or [])
            )
            return events + self._close_message(item, part)
        if item.get("type") == "function_call":
            events = [self._added(index, {**item, "status": "in_progress", "arguments": ""})]
            events.append(self._arguments_delta(item["id"], index, item["arguments"]))
            return events + self._close_call(item)
        return self.add_item(item) + self.done_item(item)

    def _text(self, text: str, tokens: list[dict[str, Any]]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if self._open is None or self._open.call is not None:
            events += self._close(False)
            choice = self.fold.choice(0)  # this chunk is in it already
            written = len(choice["message"].get("content") or "") - len(text)
            scored = len((choice.get("logprobs") or {}).get("content") or []) - len(tokens)
            self._open = _Open(
                new_item_id("msg"), len(self.response["output"]), start=written, logprobs_start=scored
            )
            events += self._open_message(self._open.id, self._open.output_index)
        events.append(self._text_delta(self._open.id, self._open.output_index, text, tokens))
        return events

    def _call(self, delta: dict[str, Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        index = delta.get("index", 0)
        if (self._whole_call(index).get("function") or {}).get("name") in self.hosted:
            return []  # the server runs it: its own item comes when it does
        if self._open is None or self._open.call != index:
            events += self._close(False)
            item = call_item(new_item_id("fc"), self._whole_call(index), "in_progress")
            self._open = _Open(item["id"], len(self.response["output"]), index, item["call_id"])
            events.append(self._added(self._open.output_index, {**item, "arguments": ""}))
        arguments = (delta.get("function") or {}).get("arguments")
        if arguments:
            events.append(self._arguments_delta(self._open.id, self._open.output_index, arguments))
        return events

    def _close(self, cut: bool) -> list[dict[str, Any]]:
        """Close the open item, whole as the fold has it."""
        opened, self._open = self._open, None
        if opened is None:
            return []
        status = "incomplete" if cut else "completed"
        if opened.call is not None:
            call = {**self._whole_call(opened.call), "id": opened.call_id}
            return self._close_call(call_item(opened.id, call, status))
        choice = self.fold.choice(0)
        text = (choice["message"].get("content") or "")[opened.start :]
        tokens = ((choice.get("logprobs") or {}).get("content") or [])[opened.logprobs_start :]
        item = message_item(opened.id, text, [logprob(e) for e in tokens], status)
        part = item["content"][0]
        events = []
        for number, annotation in enumerate(self.annotate(text) if self.annotate else []):
            part["annotations"].append(annotation)
            events.append(
                self._event(
                    "response.output_text.annotation.added", item_id=opened.id,
                    output_index=opened.output_index, content_index=0, annotation_index=number,
                    annotation=annotation,
                )
            )  # fmt: skip
        return events + self._close_message(item, part)

    def _whole_call(self, index: int) -> dict[str, Any]:
        calls = self.fold.choice(0)["message"].get("tool_calls") or []
        return next((c for c in calls if c.get("index") == index), {})

    def _open_message(self, item_id: str, index: int) -> list[dict[str, Any]]:
        item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        return [self._added(index, item), self._event("response.content_part.added", **where, part=part)]

    def _text_delta(
        self, item_id: str, index: int, text: str, tokens: list[dict[str, Any]]
    ) -> dict[str, Any]:
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        return self._event("response.output_text.delta", **where, delta=text, logprobs=tokens)

    def _close_message(self, item: dict[str, Any], part: dict[str, Any]) -> list[dict[str, Any]]:
        index = len(self.response["output"])
        self.response["output"].append(item)
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        text, tokens = part.get("text", ""), part.get("logprobs") or []
        return [
            self._event("response.output_text.done", **where, text=text, logprobs=tokens),
            self._event("response.content_part.done", **where, part=dict(part)),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def _arguments_delta(self, item_id: str, index: int, arguments: str) -> dict[str, Any]:
        return self._event(
            "response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=arguments
        )

    def _close_call(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        index = len(self.response["output"])
        self.response["output"].append(item)
        return [
            self._event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=item["arguments"],
            ),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def _added(self, index: int, item: dict[str, Any]) -> dict[str, Any]:
        return self._event("response.output_item.added", output_index=index, item=item)

    def _lifecycle(self, kind: str) -> dict[str, Any]:
        return self._event(kind, response={**self.response, "output": list(self.response["output"])})

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event


# The codes a Response's `error` may carry (the SDK's type refuses any other, and its client then retries).
_ERROR_CODES = frozenset(typing.get_args(ResponseError.model_fields["code"].annotation))


def _error_code(error: dict[str, Any]) -> str:
    """The Responses error code for an error that ended a turn: its own where the type has it; a request
    the model cannot take (its context overflowed by a tool's output, a bad value) is `invalid_prompt`;
    anything else `server_error`. The message keeps what happened."""
    code = str(error.get("code") or "")
    if code in _ERROR_CODES:
        return code
    return "invalid_prompt" if error.get("type") == "invalid_request_error" else "server_error"


def _added_usage(earlier: dict[str, Any] | None, now: dict[str, Any]) -> dict[str, Any]:
    if earlier is None:
        return now
    total = dict(now)
    for name in ("input_tokens", "output_tokens", "total_tokens"):
        total[name] = earlier[name] + now[name]
    cached = earlier["input_tokens_details"]["cached_tokens"] + now["input_tokens_details"]["cached_tokens"]
    total["input_tokens_details"] = {**now["input_tokens_details"], "cached_tokens": cached}
    return total


def replayed(response: dict[str, Any], after: int | None) -> AsyncGenerator[dict[str, Any], None]:
    """The events of a stored (not background) response, from its items, after sequence number `after`."""

    async def events() -> AsyncGenerator[dict[str, Any], None]:
        builder = ResponseEvents({**response, "status": "in_progress", "output": [], "usage": None})
        produced = builder.start()
        for item in response.get("output") or []:
            produced += builder.replay(item)
        status = response.get("status")
        closing = status if status in ("incomplete", "failed") else "completed"
        produced.append(builder._event(f"response.{closing}", response=response))
        for event in produced:
            if after is None or event["sequence_number"] > after:
                yield event

    return events()
