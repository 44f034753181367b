"""A property-based driver over the shapes schemathesis does not generate (the OpenAPI document types a
Responses request's `tools` and `input` loosely): every tool type and input item type the `openai` package
knows, each field of it given any JSON value (huge integers, wrong types, nesting), sent to
`POST /v1/responses`. Whatever is sent, the answer is a 2xx or an OpenAI-shaped 4xx naming a parameter,
never a 5xx or a dropped connection."""

from __future__ import annotations

import os
import typing
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses.response_input_item_param import ResponseInputItemParam
from openai.types.responses.tool_param import ToolParam

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
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


@st.composite
def shaped(draw: st.DrawFn, kinds: list[tuple[str, list[str]]]) -> dict[str, Any]:
    """One object of a known type: some of its fields, each any JSON value."""
    kind, fields = draw(st.sampled_from(kinds))
    given = draw(
        st.lists(st.sampled_from([f for f in fields if f != "type"] or ["x"]), max_size=4, unique=True)
    )
    return {"type": kind, **{field: draw(JSON) for field in given}}


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
