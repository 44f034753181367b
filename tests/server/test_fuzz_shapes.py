"""A property-based driver over the shapes schemathesis does not generate (the OpenAPI document types a
Responses request's `tools` and `input` loosely): every tool type and input item type the `openai` package
knows, each field of it given any JSON value (huge integers, wrong types, nesting), sent to
`POST /v1/responses`; the Responses WebSocket's client events; and the multipart operations' form fields.
Whatever is sent, the answer is a 2xx or an OpenAI-shaped 4xx naming a parameter (an `error` event on the
socket), never a 5xx or a dropped connection."""

from __future__ import annotations

import asyncio
import json
import os
import typing
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.beta import BetaResponsesClientEventParam, BetaResponsesServerEvent
from openai.types.responses.response_input_item_param import ResponseInputItemParam
from openai.types.responses.tool_param import ToolParam
from pydantic import TypeAdapter

from tests.support.faces import Faces

pytestmark = pytest.mark.slow  # hundreds of generated requests

EXAMPLES = int(os.environ.get("MODELPORT_FUZZ_EXAMPLES", "25")) * 12


def shapes(union: Any) -> list[tuple[str, list[str]]]:
    """Each member of a union of typed dicts: its `type` and its field names."""
    found = []
    for member in typing.get_args(union):
        hints = typing.get_type_hints(member)
        for kind in typing.get_args(hints["type"]):
            found += [(kind, sorted(hints))] if isinstance(kind, str) else []
    return found


TOOLS = shapes(ToolParam)
ITEMS = shapes(ResponseInputItemParam)
SOCKET_EVENTS = shapes(BetaResponsesClientEventParam)
SOCKET_EVENT: TypeAdapter[Any] = TypeAdapter(BetaResponsesServerEvent)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


@st.composite
def shaped(
    draw: st.DrawFn, kinds: list[tuple[str, list[str]]], base: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One object of a known type: `base`, and some of its fields each any JSON value."""
    kind, fields = draw(st.sampled_from(kinds))
    given = draw(
        st.lists(st.sampled_from([f for f in fields if f != "type"] or ["x"]), max_size=4, unique=True)
    )
    return {"type": kind, **(base or {}), **{field: draw(JSON) for field in given}}


def checked(served: Faces, body: dict[str, Any]) -> None:
    answer = httpx.post(f"{served.url}/v1/responses", json=body, timeout=60)
    assert answer.status_code < 500, (body, answer.text)
    if answer.status_code >= 400:
        error = answer.json()["error"]
        assert set(error) >= {"message", "type", "param", "code"}, answer.text


def test_no_tool_shape_breaks_the_server(tiny_faces: Faces) -> None:
    @given(tool=shaped(TOOLS))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def fuzz(tool: dict[str, Any]) -> None:
        checked(tiny_faces, {"model": "reverse", "input": "hi", "tools": [tool]})

    fuzz()


def test_no_input_item_shape_breaks_the_server(tiny_faces: Faces) -> None:
    @given(item=shaped(ITEMS))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def fuzz(item: dict[str, Any]) -> None:
        checked(tiny_faces, {"model": "reverse", "input": [item], "store": False})

    fuzz()


def test_no_responses_socket_event_breaks_the_connection(tiny_faces: Faces) -> None:
    """Every client event type of the Responses WebSocket, a valid turn's fields with some of its own given
    any JSON value, a few at a time over one connection: the server answers with events the SDK's types
    accept (an `error` for what it refuses, never a `server_error`), and a valid turn after them is served."""
    import websockets

    url = tiny_faces.url.replace("http", "ws") + "/v1/responses"
    last = {"type": "response.create", "model": "reverse", "input": "hi", "metadata": {"last": "yes"}}

    async def connection(sent: list[dict[str, Any]]) -> list[Any]:
        async with websockets.connect(url, max_size=None) as ws:
            for event in [*sent, last]:
                await ws.send(json.dumps(event))
            seen = []
            while True:
                event = SOCKET_EVENT.validate_json(await asyncio.wait_for(ws.recv(), 30))
                seen.append(event)
                if event.type == "response.completed" and event.response.metadata == last["metadata"]:
                    return seen

    @given(sent=st.lists(shaped(SOCKET_EVENTS, {"model": "reverse", "input": "hi"}), min_size=1, max_size=4))
    @settings(
        max_examples=EXAMPLES // 3, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    def fuzz(sent: list[dict[str, Any]]) -> None:
        seen = asyncio.run(connection(sent))
        assert not [e for e in seen if e.type == "error" and e.error.type == "server_error"], sent

    fuzz()


# JSON Schema's keywords, each given a value of any kind: the nested schemas, patterns, formats and
# references llguidance compiles, and values that make its compiler panic (a message cut inside a character).
KEYWORDS = st.sampled_from([
    "type", "properties", "required", "items", "prefixItems", "enum", "const", "anyOf", "oneOf", "allOf",
    "$ref", "$defs", "pattern", "format", "minLength", "maxLength", "minimum", "maximum", "multipleOf",
    "additionalProperties", "minItems", "maxItems", "uniqueItems", "not", "title",
])  # fmt: skip
SCHEMA_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["string", "integer", "object", "array", "null", "#/$defs/a", "((", "^[a-z]+$", "email"]),
    st.integers(0, 120).map(lambda n: "a" * n + "\U00060d4a" * 5),
)  # fmt: skip
SCHEMA = st.recursive(
    SCHEMA_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYWORDS | st.text(max_size=4), inner),
    max_leaves=12,
)


def test_no_json_schema_breaks_the_server(tiny_faces: Faces) -> None:
    """Schemas as a chat's `response_format` and as a tool's parameters: checked before any model runs."""

    @given(schema=st.dictionaries(KEYWORDS, SCHEMA, max_size=5), as_tool=st.booleans())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def fuzz(schema: dict[str, Any], as_tool: bool) -> None:
        body: dict[str, Any] = {"model": "reverse", "messages": [{"role": "user", "content": "hi"}]}
        if as_tool:
            body["tools"] = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
        else:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
        answer = httpx.post(f"{tiny_faces.url}/v1/chat/completions", json=body, timeout=60)
        assert answer.status_code < 500, (body, answer.text)
        if answer.status_code >= 400:
            assert set(answer.json()["error"]) >= {"message", "type", "param", "code"}, answer.text

    fuzz()


# The multipart operations' form fields, as the SDK sends them (`expires_after[seconds]`, `include[]`).
FORMS = {
    "/v1/files": ["purpose", "expires_after[anchor]", "expires_after[seconds]", "expires_after"],
    "/v1/audio/transcriptions": [
        "model", "language", "prompt", "response_format", "temperature", "stream", "chunking_strategy",
        "timestamp_granularities[]", "include[]", "known_speaker_names[]",
    ],
    "/v1/audio/translations": ["model", "prompt", "response_format", "temperature"],
}  # fmt: skip
FORM_VALUE = st.one_of(
    st.text(max_size=12),
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    JSON.map(json.dumps),
)


def test_no_multipart_form_breaks_the_server(tiny_faces: Faces) -> None:
    @given(
        path=st.sampled_from(sorted(FORMS)),
        data=st.data(),
        upload=st.sampled_from([b"", b"hello", b"RIFF\x00\x00\x00\x00WAVEfmt ", bytes(range(256))]),
        with_file=st.booleans(),
    )
    @settings(
        max_examples=EXAMPLES // 3, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    def fuzz(path: str, data: st.DataObject, upload: bytes, with_file: bool) -> None:
        names = data.draw(st.lists(st.sampled_from(FORMS[path]), max_size=4))
        fields: list[tuple[str, Any]] = [(name, (None, data.draw(FORM_VALUE))) for name in names]
        fields += [("file", ("upload.wav", upload))] if with_file else []
        answer = httpx.post(f"{tiny_faces.url}{path}", files=fields, timeout=60)
        assert answer.status_code < 500, (path, fields, answer.text)
        if answer.status_code >= 400:
            assert set(answer.json()["error"]) >= {"message", "type", "param", "code"}, answer.text

    fuzz()
