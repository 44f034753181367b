"""A chat completion's chunks, as the Responses API's typed events and its final `Response`.

The order is the one the openai SDK's stream helper checks: `response.created` first, every output item and
content part announced before its deltas, text events with `logprobs`, items closed before the response,
and a closing `response.completed` (or `response.incomplete` / `response.failed`); `sequence_number`
increases by one per event.
"""

from __future__ import annotations

import time
from typing import Any

from modelport.service.responses.items import new_id


class ResponseEvents:
    """Builds the events of one response from the chunks of its chat completion."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response  # the snapshot, with `output` growing as items complete
        self.sequence = 0
        self._text: dict[str, Any] | None = None  # the message item being written
        self._calls: dict[int, dict[str, Any]] = {}  # function_call items by their chat tool-call index
        self._open_call: dict[str, Any] | None = None
        self._finish: str | None = None

    def start(self) -> list[dict[str, Any]]:
        """`response.created` and `response.in_progress`."""
        return [self._lifecycle("response.created"), self._lifecycle("response.in_progress")]

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """The events for one chat chunk."""
        events: list[dict[str, Any]] = []
        if chunk.get("usage"):
            self.response["usage"] = _usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                events += self._text_delta(delta["content"], (choice.get("logprobs") or {}).get("content"))
            for call in delta.get("tool_calls") or []:
                events += self._call_delta(call)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return events

    def finish(self) -> list[dict[str, Any]]:
        """Close the open items, then `response.completed` (or `.incomplete` when cut by the token budget)."""
        cut = self._finish == "length"
        events = self._close_text(cut) + self._close_call(cut)
        self.response["completed_at"] = int(time.time())
        if cut:
            self.response.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
            return [*events, self._lifecycle("response.incomplete")]
        self.response["status"] = "completed"
        return [*events, self._lifecycle("response.completed")]

    def fail(self, error: dict[str, Any], status: str = "failed") -> list[dict[str, Any]]:
        """Close what was produced and end with `response.failed` (or mark it `incomplete`/`cancelled`)."""
        events = self._close_text(True) + self._close_call(True)
        self.response["status"] = status
        if status == "failed":
            self.response["error"] = {
                "code": str(error.get("code") or "server_error"),
                "message": error["message"],
            }
            return [*events, self._lifecycle("response.failed")]
        if status == "incomplete":
            self.response["incomplete_details"] = {"reason": "interrupted"}
            return [*events, self._lifecycle("response.incomplete")]
        return events

    def _text_delta(self, text: str, logprobs: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        events = self._close_call(False)
        if self._text is None:
            self._text = {
                "id": new_id("msg"),
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
            }
            self._text["content"] = []
            index = len(self.response["output"])
            self._text["output_index"] = index
            events.append(
                self._event("response.output_item.added", output_index=index, item=_item(self._text))
            )
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            self._text["content"].append(part)
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=self._text["id"],
                    output_index=index,
                    content_index=0,
                    part=dict(part),
                )
            )
        part = self._text["content"][0]
        part["text"] += text
        items = [_logprob(entry) for entry in logprobs or []]
        part["logprobs"] += items
        events.append(
            self._event(
                "response.output_text.delta",
                item_id=self._text["id"],
                output_index=self._text["output_index"],
                content_index=0,
                delta=text,
                logprobs=items,
            )
        )
        return events

    def _call_delta(self, call: dict[str, Any]) -> list[dict[str, Any]]:
        index = call.get("index", 0)
        function = call.get("function") or {}
        events: list[dict[str, Any]] = []
        item = self._calls.get(index)
        if item is None:
            events += self._close_text(False) + self._close_call(False)
            output_index = len(self.response["output"])
            item = self._calls[index] = {
                "id": new_id("fc"),
                "type": "function_call",
                "status": "in_progress",
                "call_id": call.get("id") or new_id("call"),
                "name": function.get("name") or "",
                "arguments": "",
                "output_index": output_index,
            }
            self._open_call = item
            events.append(
                self._event("response.output_item.added", output_index=output_index, item=_item(item))
            )
        if function.get("arguments"):
            item["arguments"] += function["arguments"]
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=item["output_index"],
                    delta=function["arguments"],
                )
            )
        return events

    def _close_text(self, cut: bool) -> list[dict[str, Any]]:
        item, self._text = self._text, None
        if item is None:
            return []
        part = item["content"][0]
        index = item["output_index"]
        item["status"] = "incomplete" if cut else "completed"
        self.response["output"].append(_item(item))
        common = {"item_id": item["id"], "output_index": index, "content_index": 0}
        return [
            self._event("response.output_text.done", **common, text=part["text"], logprobs=part["logprobs"]),
            self._event("response.content_part.done", **common, part=dict(part)),
            self._event("response.output_item.done", output_index=index, item=_item(item)),
        ]

    def _close_call(self, cut: bool) -> list[dict[str, Any]]:
        item, self._open_call = self._open_call, None
        if item is None:
            return []
        item["status"] = "incomplete" if cut else "completed"
        self.response["output"].append(_item(item))
        index = item["output_index"]
        return [
            self._event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=item["arguments"],
            ),
            self._event("response.output_item.done", output_index=index, item=_item(item)),
        ]

    def _lifecycle(self, kind: str) -> dict[str, Any]:
        return self._event(kind, response=_copy(self.response))

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event


def _item(item: dict[str, Any]) -> dict[str, Any]:
    shown = {k: v for k, v in item.items() if k != "output_index"}
    if "content" in shown:
        shown["content"] = [dict(part) for part in shown["content"]]
    return shown


def _copy(response: dict[str, Any]) -> dict[str, Any]:
    return {**response, "output": [_item(item) for item in response["output"]]}


def _usage(usage: dict[str, Any]) -> dict[str, Any]:
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "input_tokens_details": {"cached_tokens": int(cached), "cache_write_tokens": 0},
        "output_tokens": int(usage.get("completion_tokens") or 0),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": int(usage.get("total_tokens") or 0),
    }


def _logprob(entry: dict[str, Any]) -> dict[str, Any]:
    top = [
        {"token": t.get("token", ""), "logprob": t.get("logprob", 0.0), "bytes": t.get("bytes") or []}
        for t in entry.get("top_logprobs") or []
    ]
    return {
        "token": entry.get("token", ""),
        "logprob": entry.get("logprob", 0.0),
        "bytes": entry.get("bytes") or [],
        "top_logprobs": top,
    }
