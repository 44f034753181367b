"""What the OpenResponses specification (openresponses.org: `public/openapi/openapi.json` of version
2026-04-24, and `schema/components/schemas/ResponseResource.json` after it) requires of a response object,
its items and its streaming events, carried here as a JSON Schema of our own: required fields present
(nullable ones as null, never missing), optional ones absent rather than null, enums as the spec lists
them. Items and tools the specification does not define (OpenAI's `file_search_call`, `mcp_call`,
`file_search` and `mcp` tools, …) are checked for a `type` only; annotations too (the specification lists
URL citations alone, OpenAI also has file citations)."""

from __future__ import annotations

from typing import Any

import jsonschema

_STRING, _INTEGER, _NUMBER, _BOOLEAN = ({"type": t} for t in ("string", "integer", "number", "boolean"))


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _object(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(required),
        "properties": {**required, **(optional or {})},
    }


def _const(value: str) -> dict[str, Any]:
    return {"const": value}


def _where(*fields: str) -> dict[str, Any]:
    """The fields of an event that names a place in the output."""
    kinds = {"item_id": _STRING, "output_index": _INTEGER, "content_index": _INTEGER}
    return {name: kinds[name] for name in fields}


_STATUS = {"enum": ["in_progress", "completed", "incomplete"]}
_LOGPROB = _object(
    {
        "token": _STRING,
        "logprob": _NUMBER,
        "bytes": {"type": "array", "items": _INTEGER},
        "top_logprobs": {"type": "array", "items": _object({"token": _STRING, "logprob": _NUMBER})},
    }
)
_OUTPUT_TEXT = _object(
    {"type": _const("output_text"), "text": _STRING, "annotations": {"type": "array"}},
    {"logprobs": {"type": "array", "items": _LOGPROB}},
)
_PART = {
    "if": {"properties": {"type": _const("output_text")}},
    "then": _OUTPUT_TEXT,
    "else": _object({"type": {"enum": ["input_text", "text", "summary_text", "reasoning_text", "refusal",
                                       "input_image", "input_file", "input_video"]}}),
}  # fmt: skip
_MESSAGE = _object(
    {
        "type": _const("message"),
        "id": _STRING,
        "status": _STATUS,
        "role": {"enum": ["user", "assistant", "system", "developer"]},
        "content": {"type": "array", "items": _PART},
    },
    {"phase": {"enum": ["commentary", "final_answer"]}},
)
_FUNCTION_CALL = _object(
    {
        "type": _const("function_call"),
        "id": _STRING,
        "call_id": _STRING,
        "name": _STRING,
        "arguments": _STRING,
        "status": _STATUS,
    }
)
_FUNCTION_CALL_OUTPUT = _object(
    {
        "type": _const("function_call_output"),
        "id": _STRING,
        "call_id": _STRING,
        "output": {"type": ["string", "array"]},
        "status": _STATUS,
    }
)
# OpenAI's custom tool call (the specification has none): as OpenAI's API reference defines it.
_CUSTOM_TOOL_CALL = _object(
    {"type": _const("custom_tool_call"), "call_id": _STRING, "name": _STRING, "input": _STRING},
    {"id": _STRING, "namespace": _STRING},
)
_SUMMARY_TEXT = _object({"type": _const("summary_text"), "text": _STRING})
_REASONING_TEXT = _object({"type": _const("reasoning_text"), "text": _STRING})
_REASONING = _object(
    {"type": _const("reasoning"), "id": _STRING, "summary": {"type": "array", "items": _SUMMARY_TEXT}},
    {
        "content": {"type": "array", "items": _REASONING_TEXT},
        "encrypted_content": _STRING,
        "status": _STATUS,
    },
)
_SPEC_ITEMS = {
    "message": _MESSAGE,
    "function_call": _FUNCTION_CALL,
    "function_call_output": _FUNCTION_CALL_OUTPUT,
    "reasoning": _REASONING,
    "custom_tool_call": _CUSTOM_TOOL_CALL,
}


def _by_type(kinds: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One schema per `type`; a type not listed needs only to be named."""
    branches: list[dict[str, Any]] = [
        {"if": {"properties": {"type": _const(kind)}}, "then": schema} for kind, schema in kinds.items()
    ]
    return {"type": "object", "required": ["type"], "properties": {"type": _STRING}, "allOf": branches}


_ITEM = _by_type(_SPEC_ITEMS)
_FUNCTION_TOOL = _object(
    {
        "type": _const("function"),
        "name": _STRING,
        "description": _nullable(_STRING),
        "parameters": _nullable({"type": "object"}),
        "strict": _nullable(_BOOLEAN),
    }
)
_FORMAT = _by_type(
    {
        "text": _object({"type": _const("text")}),
        "json_object": _object({"type": _const("json_object")}),
        "json_schema": _object(
            {
                "type": _const("json_schema"),
                "name": _STRING,
                "description": _nullable(_STRING),
                "schema": {},
                "strict": _BOOLEAN,
            }
        ),
    }
)
_USAGE = _object(
    {
        "input_tokens": _INTEGER,
        "output_tokens": _INTEGER,
        "total_tokens": _INTEGER,
        "input_tokens_details": _object({"cached_tokens": _INTEGER}),
        "output_tokens_details": _object({"reasoning_tokens": _INTEGER}),
    }
)
_TOOL_CHOICE = {
    "anyOf": [
        {"enum": ["none", "auto", "required"]},
        _object({"type": _STRING}),  # a function, or a tool of OpenAI's by type
    ]
}
RESPONSE = _object(
    {
        "id": _STRING,
        "object": _const("response"),
        "created_at": _INTEGER,
        "completed_at": _nullable(_INTEGER),
        "status": _STRING,
        "incomplete_details": _nullable(_object({"reason": _STRING})),
        "model": _STRING,
        "previous_response_id": _nullable(_STRING),
        "instructions": _nullable({"type": ["string", "array"]}),
        "output": {"type": "array", "items": _ITEM},
        "error": _nullable(_object({"code": _STRING, "message": _STRING})),
        "tools": {"type": "array", "items": _by_type({"function": _FUNCTION_TOOL})},
        "tool_choice": _TOOL_CHOICE,
        "truncation": {"enum": ["auto", "disabled"]},
        "parallel_tool_calls": _BOOLEAN,
        "text": _object({"format": _FORMAT}, {"verbosity": {"enum": ["low", "medium", "high"]}}),
        "top_p": _NUMBER,
        "presence_penalty": _NUMBER,
        "frequency_penalty": _NUMBER,
        "top_logprobs": _INTEGER,
        "temperature": _NUMBER,
        "reasoning": _nullable(
            _object(
                {
                    "effort": _nullable(
                        {"enum": ["none", "minimal", "low", "medium", "high", "xhigh", "max"]}
                    ),
                    "summary": _nullable({"enum": ["concise", "detailed", "auto"]}),
                }
            )
        ),
        "usage": _nullable(_USAGE),
        "max_output_tokens": _nullable(_INTEGER),
        "max_tool_calls": _nullable(_INTEGER),
        "store": _BOOLEAN,
        "background": _BOOLEAN,
        "service_tier": _STRING,
        "metadata": {},
        "safety_identifier": _nullable(_STRING),
        "prompt_cache_key": _nullable(_STRING),
        "user": _nullable(_STRING),  # required since the schema's later revisions
    },
    {"conversation": _nullable(_object({"id": _STRING}))},
)
_SEQUENCED = {"type": _STRING, "sequence_number": _INTEGER}
_LIFECYCLE = _object({**_SEQUENCED, "response": RESPONSE})
EVENT = _by_type(
    {
        **{
            f"response.{kind}": _LIFECYCLE
            for kind in ("created", "queued", "in_progress", "completed", "failed", "incomplete")
        },
        **{
            f"response.output_item.{kind}": _object({**_SEQUENCED, "output_index": _INTEGER, "item": _ITEM})
            for kind in ("added", "done")
        },
        **{
            f"response.content_part.{kind}": _object(
                {**_SEQUENCED, **_where("item_id", "output_index", "content_index"), "part": _PART}
            )
            for kind in ("added", "done")
        },
        "response.output_text.delta": _object(
            {
                **_SEQUENCED,
                **_where("item_id", "output_index", "content_index"),
                "delta": _STRING,
                "logprobs": {"type": "array", "items": _LOGPROB},
            }
        ),
        "response.output_text.done": _object(
            {
                **_SEQUENCED,
                **_where("item_id", "output_index", "content_index"),
                "text": _STRING,
                "logprobs": {"type": "array", "items": _LOGPROB},
            }
        ),
        "response.output_text.annotation.added": _object(
            {
                **_SEQUENCED,
                **_where("item_id", "output_index", "content_index"),
                "annotation_index": _INTEGER,
                "annotation": _object({"type": _STRING}),
            }
        ),
        "response.reasoning_text.delta": _object(
            {**_SEQUENCED, **_where("item_id", "output_index", "content_index"), "delta": _STRING}
        ),
        "response.reasoning_text.done": _object(
            {**_SEQUENCED, **_where("item_id", "output_index", "content_index"), "text": _STRING}
        ),
        **{
            f"response.reasoning_summary_part.{kind}": _object(
                {
                    **_SEQUENCED,
                    **_where("item_id", "output_index"),
                    "summary_index": _INTEGER,
                    "part": _SUMMARY_TEXT,
                }
            )
            for kind in ("added", "done")
        },
        "response.reasoning_summary_text.delta": _object(
            {**_SEQUENCED, **_where("item_id", "output_index"), "summary_index": _INTEGER, "delta": _STRING}
        ),
        "response.reasoning_summary_text.done": _object(
            {**_SEQUENCED, **_where("item_id", "output_index"), "summary_index": _INTEGER, "text": _STRING}
        ),
        "response.function_call_arguments.delta": _object(
            {**_SEQUENCED, **_where("item_id", "output_index"), "delta": _STRING}
        ),
        "response.function_call_arguments.done": _object(
            {**_SEQUENCED, **_where("item_id", "output_index"), "arguments": _STRING}
        ),
        "response.custom_tool_call_input.delta": _object(
            {**_SEQUENCED, **_where("item_id", "output_index"), "delta": _STRING}
        ),
        "response.custom_tool_call_input.done": _object(
            {**_SEQUENCED, **_where("item_id", "output_index"), "input": _STRING}
        ),
    }
)


def _no_null_optional(value: Any, schema: dict[str, Any], where: str) -> list[str]:
    """Where an optional field (one the schema lists but does not require) is null: the specification's
    optional fields are absent or set, never null."""
    found: list[str] = []
    if isinstance(value, dict):
        for branch in schema.get("allOf", []):
            if value.get("type") == branch["if"]["properties"]["type"]["const"]:
                found += _no_null_optional(value, branch["then"], where)
        required = set(schema.get("required", []))
        for name, inner in (schema.get("properties") or {}).items():
            if name not in value:
                continue
            if value[name] is None and name not in required:
                found.append(f"{where}.{name}")
            found += _no_null_optional(value[name], _unwrapped(inner), f"{where}.{name}")
    elif isinstance(value, list) and "items" in schema:
        for i, element in enumerate(value):
            found += _no_null_optional(element, _unwrapped(schema["items"]), f"{where}[{i}]")
    return found


def _unwrapped(schema: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in schema:
        return next((s for s in schema["anyOf"] if s.get("type") != "null"), schema)
    if "then" in schema and "if" in schema and "allOf" not in schema:
        return dict(schema["then"])
    return schema


# An integer is written as one: JSON Schema takes `1.0` as an integer, but a client that reads the field as an
# integer (Rust's `u64`, Go's `int64`) refuses it.
_WRITTEN = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
)
_CHECKER = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_WRITTEN)


def problems(value: Any, schema: dict[str, Any]) -> list[str]:
    """What the specification finds wrong in `value` (a response object or an event, as JSON parsed it):
    nothing when it conforms."""
    checker = _CHECKER(schema)
    found = [
        f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in checker.iter_errors(value)
    ]
    return found + [
        f"{where}: null where the field is optional" for where in _no_null_optional(value, schema, "")
    ]
