"""The `Response` of a turn before any output: every field as the request gave it, checked as the
`Response` type takes them. Each streamed event's snapshot, the stored row and the whole answer start
from it."""

from __future__ import annotations

import time
from typing import Any

from modelport.protocol.response_object import ResponseObject
from modelport.protocol.response_request import ReasoningOptions, ResponseRequest, TextOptions
from modelport.service.responses import items
from modelport.service.responses.tool_specs import echoed


def skeleton(request: ResponseRequest, model_id: str, store: bool) -> ResponseObject:
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
            "reasoning": _reasoning(request.reasoning or ReasoningOptions()),
            "service_tier": "default",  # the tier used, as OpenAI echoes it: here there is one
            "store": store,
            "temperature": request.temperature if request.temperature is not None else 1.0,
            "presence_penalty": request.presence_penalty or 0.0,
            "frequency_penalty": request.frequency_penalty or 0.0,
            "text": _text_config(request.text),
            "tool_choice": request.tool_choice if request.tool_choice is not None else "auto",
            "tools": echoed(request.tools or []),
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


def _reasoning(given: ReasoningOptions) -> dict[str, Any]:
    """`reasoning` as the response echoes it: effort and summary (by either name the request gave it) always
    there, and the fields beside them (`context`, a newer one) as they were sent."""
    sent = given.model_dump(exclude_unset=True, exclude={"generate_summary"})
    return {**sent, "effort": given.effort, "summary": given.summary_asked()}


def _text_config(given: TextOptions | None) -> dict[str, Any]:
    """`text` as the response echoes it: its format (plain text unless given; a JSON schema's `description`
    and `strict` always there, as the specification requires them), and `verbosity` only where it was given
    (optional: absent, never null)."""
    text = given.model_dump(mode="json", exclude_none=True, by_alias=True) if given is not None else {}
    shown = {"format": {"type": "text"}, **text}
    if isinstance(shown["format"], dict) and shown["format"].get("type") == "json_schema":
        shown["format"] = {"description": None, "strict": False, **shown["format"]}
    return shown
