"""The Responses API through the openai SDK, over HTTP and in-process: conversations chained by
`previous_response_id` (checked exactly with a model that answers with the conversation it was given),
function tools round trips streamed and not (the SDK's own stream helper accumulating), `parse` with a
pydantic format, background responses, and what is refused."""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.support import openresponses
from tests.support.faces import Faces
from tests.support.live import counted, emptied_past

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
BRIEF = "You are a helpful assistant. Answer briefly."


@pytest.fixture
def recall(tiny: Any) -> Any:
    """A model that answers with the conversation it was given: what each turn really reached it with."""
    return tiny


@pytest.fixture
def recall_http(tiny_faces: Faces) -> openai.OpenAI:
    return tiny_faces.http


def test_three_turns_chain_through_previous_response_id(recall: Any) -> None:
    one = recall.responses.create(model="recall", input="my colour is teal", instructions="be brief")
    assert one.status == "completed"
    assert one.output_text == "system: be brief / user: my colour is teal"
    two = recall.responses.create(model="recall", input="what is two plus two", previous_response_id=one.id)
    three = recall.responses.create(
        model="recall", input="what is my colour", previous_response_id=two.id, instructions="answer now"
    )
    # Turn three reaches the model with turn one's and turn two's inputs and outputs, and its own
    # instructions only (instructions are not carried from earlier turns).
    said = [
        "system: answer now",
        "user: my colour is teal",
        f"assistant: {one.output_text}",
        "user: what is two plus two",
        f"assistant: {two.output_text}",
        "user: what is my colour",
    ]
    assert three.output_text == " / ".join(said)
    assert three.previous_response_id == two.id
    assert three.usage.output_tokens > 0
    assert recall.responses.retrieve(three.id).output_text == three.output_text
    items = recall.responses.input_items.list(three.id)
    assert [i.type for i in items.data] == ["message"]
    assert items.data[0].content[0].text == "what is my colour"


def test_a_deleted_turn_breaks_its_conversation_with_a_404(recall: Any) -> None:
    one = recall.responses.create(model="recall", input="first")
    two = recall.responses.create(model="recall", input="second", previous_response_id=one.id)
    recall.responses.delete(one.id)
    with pytest.raises(openai.NotFoundError) as caught:
        recall.responses.create(model="recall", input="third", previous_response_id=two.id)
    assert caught.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError):
        recall.responses.create(model="recall", input="x", previous_response_id="resp_unknown")
    with pytest.raises(openai.NotFoundError):
        recall.responses.retrieve(one.id)


def test_an_item_reference_stands_for_the_stored_item_it_names(recall: Any) -> None:
    """The Vercel AI SDK gives back the items it was answered with as `item_reference`s (by id) when
    responses are stored: each reaches the model as the item itself, from any earlier response of the
    caller's, the latest holding it; one that no stored response holds is a 404 naming it."""
    one = recall.responses.create(model="recall", input="my colour is teal")
    asked = {"type": "message", "role": "user", "content": "what is my colour"}
    two = recall.responses.create(
        model="recall",
        input=[
            {"type": "item_reference", "id": one.output[0].id},  # an output item
            {"type": "message", "role": "user", "content": "again"},
            asked,
        ],
    )
    # (the user's two messages are one turn, as the model's template has them)
    assert two.output_text == f"assistant: {one.output_text} / user: again\n\nwhat is my colour"
    kept = recall.responses.input_items.list(two.id, order="asc").data
    assert kept[0].id == one.output[0].id  # stored as the item it stood for
    given = recall.responses.input_items.list(one.id).data[0].id
    three = recall.responses.create(model="recall", input=[{"type": "item_reference", "id": given}])
    assert three.output_text == "user: my colour is teal"  # an input item, by the id it was given
    recall.responses.delete(one.id)  # and its items with it: only the copy turn two keeps is left
    again = recall.responses.create(
        model="recall", input=[{"type": "item_reference", "id": one.output[0].id}]
    )
    assert again.output_text == f"assistant: {one.output_text}"
    for held in (two.id, again.id):  # each kept a copy
        recall.responses.delete(held)
    with pytest.raises(openai.NotFoundError) as missing:
        recall.responses.create(
            model="recall", input=[asked, {"type": "item_reference", "id": one.output[0].id}]
        )
    assert missing.value.body["param"] == "input[1].id"
    with pytest.raises(openai.BadRequestError):  # not an item of a conversation
        recall.conversations.create(items=[{"type": "item_reference", "id": given}])


def test_an_unstored_response_is_not_kept(recall: Any) -> None:
    response = recall.responses.create(model="recall", input="forget me", store=False)
    assert response.output_text == "user: forget me"
    with pytest.raises(openai.NotFoundError):
        recall.responses.retrieve(response.id)


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"tools": [{"type": "telepathy"}]}, "tools[0].type"),
        ({"tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}}, "tool_choice.type"),
        (
            {"tools": [{"type": "namespace", "name": "n", "description": "d", "tools": [{"type": "mcp"}]}]},
            "tools[0].tools[0].type",
        ),
        (
            {
                "tools": [
                    {
                        "type": "custom",
                        "name": "c",
                        "format": {"type": "grammar", "syntax": "ebnf", "definition": "x"},
                    }
                ]
            },
            "tools[0].format.syntax",
        ),
        ({"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
        ({"text": {"verbosity": "chatty"}}, "text.verbosity"),
        ({"input": [{"type": "computer_call", "id": "x"}]}, "input[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_video", "video_url": "x"}]}]},
            "input[0].content[0].type",
        ),
        ({"input": [{"role": "wizard", "content": "hi"}]}, "input[0].role"),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"metadata": {"k": "v" * 600}}, "metadata"),
        ({"text": {"format": {"type": "yaml"}}}, "text.format.type"),
        ({"tool_choice": {"type": "file_search"}}, "tool_choice"),
        ({"tool_choice": {"type": "function"}}, "tool_choice.name"),
        ({"tool_choice": {"type": "telepathy"}}, "tool_choice.type"),
        ({"tools": ["web_search"]}, "tools[0].type"),  # a tool is an object, its type one of the kinds
        ({"tool_choice": {"type": "mcp", "server_label": "nowhere"}}, "tool_choice"),
        ({"conversation": "conv_1", "previous_response_id": "resp_1"}, "conversation"),
        ({"conversation": ""}, "conversation"),
        ({"conversation": {"id": ""}}, "conversation"),
    ],
)
def test_what_a_local_model_cannot_honour_is_a_400_naming_it(
    recall: Any, params: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        recall.responses.create(**{"model": "recall", "input": "hi", **params})
    assert caught.value.body["param"] == param


NONSENSE = {"type": "object", "properties": {"a": {"type": "nonsense"}}}
IMAGE = {
    "role": "user",
    "content": [{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}],
}


@pytest.mark.parametrize(
    ("params", "param", "said"),
    [
        ({"text": {"format": {"type": "json_schema", "name": "x", "schema": NONSENSE}}}, "text.format",
         "text.format.schema.properties.a.type"),
        ({"tools": [{"type": "custom", "name": "c"}, {"type": "function", "name": "g", "parameters": {}},
                    {"type": "function", "name": "f", "parameters": NONSENSE}]}, "tools",
         "tools[2].parameters.properties.a.type"),
        ({"instructions": "x", "input": [{"role": "user", "content": "hi"}, IMAGE]},
         "input[1].content[0].type", "input[1].content[0] is an image"),
    ],
)  # fmt: skip
def test_a_400_of_the_chat_a_turn_becomes_says_what_the_request_sent(
    recall: Any, params: dict[str, Any], param: str, said: str
) -> None:
    """The chat's checks name `response_format.json_schema.schema`, `tools[i].function.parameters` and
    `messages[k]`; a Responses request sent `text.format`, flat tools and `input[i]`."""
    with pytest.raises(openai.BadRequestError) as caught:
        recall.responses.create(**{"model": "recall", "input": "hi", **params})
    assert caught.value.body["param"] == param
    assert said in caught.value.body["message"]


def test_reasoning_and_verbosity_are_accepted_and_echoed_as_clients_send_them(recall: Any) -> None:
    # The OpenAI Agents SDK sends both by default with gpt-5 models; they change nothing on these models.
    response = recall.responses.create(
        model="recall",
        input="hi",
        reasoning={"effort": "low", "summary": "auto"},
        text={"verbosity": "low"},
    )
    assert response.output_text == "user: hi"
    assert response.reasoning.effort == "low"
    assert response.reasoning.summary == "auto"
    assert response.text.verbosity == "low"


def test_reasoning_s_older_and_newer_fields_are_read_and_echoed(recall: Any) -> None:
    """`generate_summary` (the older name of `summary`) is shown as `summary`; `context` and a field
    OpenAI may add later are echoed as sent."""
    response = recall.responses.create(
        model="recall",
        input="hi",
        reasoning={"generate_summary": "concise", "context": "current_turn", "mode": "deep"},  # type: ignore[typeddict-unknown-key]
    )
    assert response.reasoning is not None
    shown = response.reasoning.to_dict()
    assert shown["summary"] == "concise"
    assert "generate_summary" not in shown
    assert shown["context"] == "current_turn"
    assert shown["mode"] == "deep"


def test_the_object_has_every_required_field_and_no_null_optional_one(recall_http: openai.OpenAI) -> None:
    # As the OpenResponses specification's schema requires them (its compliance suite checks each object).
    url = f"{recall_http.base_url}responses"
    body = {"model": "recall", "input": "one two", "presence_penalty": 0.5}
    whole = httpx.post(url, json=body, timeout=60).json()
    for name, kind in (
        ("presence_penalty", float),
        ("frequency_penalty", float),
        ("top_logprobs", int),
        ("temperature", float),
        ("top_p", float),
    ):
        assert isinstance(whole[name], kind), name
    assert float(whole["completed_at"]).is_integer()  # seconds (the SDK's type is a float)
    assert whole["presence_penalty"] == 0.5
    assert whole["tool_choice"] == "auto"
    assert whole["truncation"] == "disabled"
    assert whole["service_tier"] == "default"
    assert "verbosity" not in whole["text"]  # optional: absent, never null
    assert all("phase" not in item for item in whole["output"])
    with httpx.stream("POST", url, json={**body, "stream": True}, timeout=60) as streamed:
        snapshots = [
            json.loads(line[len("data: ") :])["response"]
            for line in streamed.iter_lines()
            if line.startswith("data: ") and '"response"' in line
        ]
    assert all("completed_at" in snapshot for snapshot in snapshots)  # null until the end, but there
    assert snapshots[0]["completed_at"] is None
    assert float(snapshots[-1]["completed_at"]).is_integer()


def sent(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """What `POST /v1/responses` sends as JSON: the response object, or each event of its stream."""
    if not body.get("stream"):
        return [httpx.post(f"{url}/v1/responses", json=body, timeout=120).json()]
    with httpx.stream("POST", f"{url}/v1/responses", json=body, timeout=120) as streamed:
        return [json.loads(line[6:]) for line in streamed.iter_lines() if line.startswith("data: {")]


def test_every_object_and_event_is_as_the_openresponses_specification_requires(
    tiny_faces: Faces, server: Faces
) -> None:
    # Its compliance suite checks each object against the specification's schema: 0 of its 11 tests
    # passed before the required fields were filled and null optional ones left out.
    first = sent(tiny_faces.url, {"model": "recall", "input": "one two", "instructions": "be brief"})[0]
    asked = [
        (tiny_faces.url, {"model": "recall", "input": "three", "previous_response_id": first["id"]}),
        (tiny_faces.url, {"model": "recall", "input": [{"role": "user", "content": "four"}], "store": False}),
        (server.url, {"model": "gpt-4o-mini", "input": "Weather in Paris?", "tools": [WEATHER],
                      "tool_choice": "required", "max_output_tokens": 40}),
        (server.url, {"model": "gpt-4o-mini", "input": "Hi", "max_output_tokens": 16, "temperature": 0,
                      "text": {"format": {"type": "json_schema", "name": "greeting", "strict": True,
                               "schema": {"type": "object", "properties": {"hi": {"type": "string"}},
                                          "required": ["hi"], "additionalProperties": False}}}}),
        (server.url, {"model": "gpt-4o-mini", "input": "Say hi", "top_logprobs": 2, "max_output_tokens": 16,
                      "include": ["message.output_text.logprobs"], "reasoning": {"effort": "low"}}),
    ]  # fmt: skip
    checked = [("first", first, openresponses.RESPONSE)]
    for url, body in asked:
        for streamed in (False, True):
            for number, value in enumerate(sent(url, {**body, "stream": streamed})):
                schema = openresponses.EVENT if streamed else openresponses.RESPONSE
                checked.append(
                    (f"{body['input']!r} {'event ' + str(number) if streamed else ''}", value, schema)
                )
    stored = httpx.get(f"{tiny_faces.url}/v1/responses/{first['id']}", timeout=60).json()
    checked.append(("retrieved", stored, openresponses.RESPONSE))
    assert {value.get("type") for _, value, _ in checked} >= {
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta", "response.output_text.done",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.completed", "response.incomplete",
    }  # fmt: skip
    wrong = {
        name: found for name, value, schema in checked if (found := openresponses.problems(value, schema))
    }
    assert not wrong


def test_the_stream_is_the_event_sequence_the_sdk_expects(recall_http: openai.OpenAI) -> None:
    events = list(recall_http.responses.create(model="recall", input="one two", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert all(e.logprobs == [] for e in events if e.type == "response.output_text.delta")
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "user: one two"
    stored = recall_http.responses.retrieve(events[-1].response.id)  # committed before the last event
    assert stored.output_text == "user: one two"
    replayed = list(recall_http.responses.retrieve(stored.id, stream=True, starting_after=3))
    assert replayed[0].sequence_number == 4
    assert replayed[-1].type == "response.completed"


def test_background_responses_run_on_and_resume_from_any_event(recall: Any) -> None:
    queued = recall.responses.create(model="recall", input="in the background", background=True)
    assert queued.status in ("queued", "in_progress")
    deadline = time.monotonic() + 30
    while (done := recall.responses.retrieve(queued.id)).status in ("queued", "in_progress"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert done.status == "completed"
    assert done.output_text == "user: in the background"
    events = list(recall.responses.retrieve(queued.id, stream=True, starting_after=2))
    assert events[0].sequence_number == 3
    assert events[-1].type == "response.completed"
    with recall.responses.stream(response_id=queued.id) as stream:
        assert stream.get_final_response().output_text == "user: in the background"


def long_story(client: openai.OpenAI) -> Any:
    """A background response that would write for a long time."""
    return client.responses.create(
        model="smollm2-135m-instruct",
        input="Tell me a very long story.",
        max_output_tokens=3000,
        background=True,
        extra_body={"logit_bias": {"0": -100, "2": -100}},
    )


def test_a_background_response_is_cancelled_and_keeps_what_it_made(server: Faces) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)
    started = long_story(client)
    following = client.responses.retrieve(started.id, stream=True)
    # Cancelled once it has written something, however busy the machine is.
    next(e for e in following if e.type == "response.output_text.delta")
    following.close()
    cancelled = client.responses.cancel(started.id)
    assert cancelled.status == "cancelled"
    time.sleep(0.5)
    kept = client.responses.retrieve(started.id)
    assert kept.status == "cancelled"
    assert kept.output_text  # what it produced before the cancel
    assert len(kept.output_text) < 3000 * 2


def test_a_response_cancelled_as_soon_as_it_is_queued_stays_cancelled(server: Faces) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)
    started = long_story(client)
    cancelled = client.responses.cancel(started.id)  # while it is queued or its prompt is read
    assert cancelled.status == "cancelled"
    time.sleep(1.0)  # the generation it raced with cannot undo the cancel
    kept = client.responses.retrieve(started.id)
    assert kept.status == "cancelled"
    again = client.responses.cancel(started.id)
    assert again.status == "cancelled"
    assert again.output == kept.output


def test_a_stored_stream_its_client_left_is_kept_as_what_it_said(server: Faces) -> None:
    # It was stored `incomplete` for the reason "interrupted", which no client's `Response` type takes:
    # retrieving it was a 500.
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)
    stream = client.responses.create(model="gpt-4o-mini", input="Tell me a long story.", stream=True)
    started = next(e for e in stream if e.type == "response.created").response
    next(e for e in stream if e.type == "response.output_text.delta")
    stream.close()
    # Stored once the server sees the client gone (a turn that is not in the background is stored as it ends).
    deadline = time.monotonic() + 30
    while httpx.get(f"{server.url}/v1/responses/{started.id}", timeout=60).status_code == 404:
        assert time.monotonic() < deadline, "not stored 30 s after its client left"
        time.sleep(0.2)
    kept = client.responses.retrieve(started.id)
    assert kept.status == "incomplete"
    assert kept.output_text  # what it said before the client left
    raw = httpx.get(f"{server.url}/v1/responses/{started.id}", timeout=60).json()
    assert not openresponses.problems(raw, openresponses.RESPONSE)


class Pet(BaseModel):
    name: str
    legs: int


def test_parse_with_a_pydantic_format(client: Any) -> None:
    parsed = client.responses.parse(
        model="smollm2-135m-instruct",
        instructions=BRIEF,
        input="Describe a dog called Rex as JSON.",
        text_format=Pet,
        max_output_tokens=120,
        temperature=0,  # sampled, a long name can use up the tokens before the JSON closes
    )
    assert isinstance(parsed.output_parsed, Pet)
    assert json.loads(parsed.output_text) == parsed.output_parsed.model_dump()


@pytest.mark.one_face
@pytest.mark.slow
def test_a_function_tool_round_trip(client: Any) -> None:
    asked = client.responses.create(
        model="smollm2-135m-instruct",
        instructions=BRIEF,
        input="What is the weather in Paris?",
        tools=[WEATHER],
        tool_choice="required",
        max_output_tokens=80,
    )
    calls = [item for item in asked.output if item.type == "function_call"]
    assert calls
    assert calls[0].name == "get_weather"
    assert set(json.loads(calls[0].arguments)) == {"city"}
    answered = client.responses.create(
        model="smollm2-135m-instruct",
        previous_response_id=asked.id,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "Sunny, 21 °C."}],
        tools=[WEATHER],
        tool_choice="none",
        max_output_tokens=40,
    )
    assert answered.output[0].type == "message"
    assert answered.output_text


@pytest.mark.one_face
@pytest.mark.slow
def test_allowed_tools_narrow_what_a_turn_may_call_of_the_tools_given(client: Any) -> None:
    clock = {
        "type": "function",
        "name": "get_time",
        "description": "The current time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
    allowed = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "function", "name": "get_time"}],
    }
    asked = client.responses.create(
        model="smollm2-135m-instruct",
        instructions=BRIEF,
        input="What is the weather in Paris?",
        tools=[WEATHER, clock],
        tool_choice=allowed,
        max_output_tokens=80,
    )
    calls = [item for item in asked.output if item.type == "function_call"]
    assert [call.name for call in calls] == ["get_time"] * len(calls)  # the one it allows, though asked
    assert calls  # `required`: a call
    assert asked.tool_choice.type == "allowed_tools"  # echoed as given
    assert [tool.name for tool in asked.tools] == ["get_weather", "get_time"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="smollm2-135m-instruct",
            input="x",
            tools=[WEATHER],
            tool_choice={**allowed, "tools": [{"type": "function", "name": "nowhere"}]},
        )
    assert caught.value.body["param"] == "tool_choice"
    assert "allows none" in caught.value.body["message"]
    unforced = client.responses.create(
        model="smollm2-135m-instruct",
        input="What is the weather in Paris?",
        tools=[WEATHER],
        tool_choice={**allowed, "mode": "auto", "tools": []},
        max_output_tokens=16,
    )
    assert [item.type for item in unforced.output] == ["message"]  # nothing allowed, nothing called


@pytest.mark.slow
def test_a_streamed_tool_round_trip_through_the_sdks_stream_helper(client: Any) -> None:
    with client.responses.stream(
        model="smollm2-135m-instruct",
        instructions=BRIEF,
        input="What is the weather in Rome?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=80,
    ) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    call = first.output[0]
    assert call.type == "function_call"
    assert call.parsed_arguments is None or "city" in call.parsed_arguments
    assert set(json.loads(call.arguments)) == {"city"}
    with client.responses.stream(
        model="smollm2-135m-instruct",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Cloudy, 17 °C."}],
        tools=[WEATHER],
        tool_choice="none",
        max_output_tokens=40,
        temperature=0,
    ) as stream:
        events = list(stream)
    texts = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert texts
    assert events[-1].type in ("response.completed", "response.incomplete")  # 40 tokens may cut it short
    assert events[-1].response.output_text == "".join(texts)


def test_events_over_http_carry_their_type_as_the_event_name(server: Faces) -> None:
    body = {
        "model": "smollm2-135m-instruct",
        "input": "Hi",
        "stream": True,
        "max_output_tokens": 16,
        "store": False,
    }
    with httpx.stream("POST", f"{server.url}/v1/responses", json=body, timeout=60) as response:
        lines = [line for line in response.iter_lines() if line]
    names = [line[len("event: ") :] for line in lines if line.startswith("event: ")]
    data = [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]
    assert names == [d["type"] for d in data]
    assert "[DONE]" not in lines


def _trailing_underscores(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        found = [f"{path}.{k}" for k in value if isinstance(k, str) and k.endswith("_")]
        return found + [p for k, v in value.items() for p in _trailing_underscores(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _trailing_underscores(v, f"{path}[{i}]")]
    return []


def test_non_streamed_responses_use_openais_field_names(server: Faces) -> None:
    """Python's names (`schema_`) on the wire lose the schema for every SDK: each route's JSON is checked."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    created = httpx.post(
        f"{server.url}/v1/responses",
        json={
            "model": "smollm2-135m-instruct",
            "input": "A name as JSON.",
            "max_output_tokens": 30,
            "text": {"format": {"type": "json_schema", "name": "named", "schema": schema}},
        },
        timeout=60,
    ).json()
    listed = httpx.get(f"{server.url}/v1/responses/{created['id']}/input_items", timeout=60).json()
    retrieved = httpx.get(f"{server.url}/v1/responses/{created['id']}", timeout=60).json()
    for answer in (created, listed, retrieved):
        assert _trailing_underscores(answer) == []
    assert retrieved["text"]["format"]["schema"] == schema
    parsed = server.http.responses.retrieve(created["id"])
    assert parsed.text is not None
    assert parsed.text.format.schema_ == schema  # type: ignore[union-attr]


def test_max_output_tokens_below_openais_minimum_is_a_400(client: Any) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="smollm2-135m-instruct", input="Hi", max_output_tokens=15)
    assert refused.value.body["param"] == "max_output_tokens"
    assert refused.value.body["code"] == "integer_below_min_value"


@pytest.mark.one_face
def test_service_tier_auto_is_echoed_as_the_tier_used(client: Any) -> None:
    answer = client.responses.create(
        model="smollm2-135m-instruct", input="Hi", max_output_tokens=16, service_tier="auto"
    )
    assert answer.service_tier == "default"


@pytest.mark.one_face
def test_include_output_text_logprobs_gives_each_tokens_logprob(client: Any) -> None:
    answer = client.responses.create(
        model="smollm2-135m-instruct",
        input="Say hello.",
        max_output_tokens=16,
        include=["message.output_text.logprobs"],
    )
    part = answer.output[0].content[0]
    assert part.logprobs
    assert all(entry.logprob <= 0 for entry in part.logprobs)
    assert "".join(entry.token for entry in part.logprobs) == part.text


@pytest.mark.one_face
def test_a_chained_turn_reports_the_earlier_turns_tokens_as_cached(client: Any) -> None:
    """`cached_tokens` is what llama.cpp really reused: the whole earlier turn, for the turn after it."""
    long = " ".join(f"Rule {i}: keep answers short and kind." for i in range(40))
    one = client.responses.create(
        model="smollm2-135m-instruct", instructions=long, input="Say hi.", max_output_tokens=16, temperature=0
    )
    two = client.responses.create(
        model="smollm2-135m-instruct", instructions=long, input="Again.", previous_response_id=one.id,
        max_output_tokens=16, temperature=0,
    )  # fmt: skip
    assert one.usage.input_tokens < two.usage.input_tokens
    assert two.usage.input_tokens_details.cached_tokens >= one.usage.input_tokens - 4
    assert two.usage.input_tokens_details.cached_tokens < two.usage.input_tokens


@pytest.mark.one_face  # the engine's cache is the subject, the same under either face
def test_a_conversations_first_message_alone_is_kept_for_the_turn_after_it(
    client: Any, server: Faces
) -> None:
    """Beside another request running (a lone message that ends alone is kept anyway: one user's chat), a
    stored turn of the user's message alone (no instructions), a chat message sent with OpenAI's
    `prompt_cache_key`, and one long enough that reading it again costs more than keeping it, are kept for
    the turn that goes on from them, though a lone message otherwise is not (most are one-off questions
    among others'): the next turn, sent once the slots are emptied, reuses it whole."""
    model = "smollm2-135m-instruct"

    def beside_another(first: Callable[[], Any]) -> Any:
        """`first()` while a long answer runs (under way before it, and going on after it: its end barred,
        it cannot reach its length meanwhile), which is then cancelled by closing its stream."""
        with client.completions.create(
            model=model, prompt="Tell a long story about a ship.", max_tokens=4000, temperature=0,
            logit_bias={"0": -100, "2": -100}, stream=True,
        ) as running:  # fmt: skip
            chunks = iter(running)
            next(chunks)
            made = first()
            assert next(chunks).choices[0].finish_reason is None
            erased = counted(server.url, "modelport_conversation_erases_total")
        # The long answer's turn ends as the server notices its client gone, and empties the slot `first`
        # was left holding beside it (its own too, unless it rests there); a request sent after that end
        # waits for the emptying. A next turn sent sooner would go on from what that slot holds, kept or not.
        emptied_past(server.url, erased)
        return made

    # Its own words on each face: a message sent a second time is kept anyway.
    long = f"{uuid.uuid4()} " + " ".join(f"Rule {i}: keep answers short and kind." for i in range(12))
    one = beside_another(
        lambda: client.responses.create(model=model, input=long, max_output_tokens=16, temperature=0)
    )
    two = client.responses.create(
        model=model, input="Again.", previous_response_id=one.id, max_output_tokens=16, temperature=0
    )
    assert two.usage.input_tokens_details.cached_tokens >= one.usage.input_tokens - 4
    # Past 4,096 characters (the rule counts characters before any tokenizing) in few tokens: a rule line
    # of dashes is a few dozen tokens where the rules said nine times over were 1,400, 10 s of reading.
    longer = f"{long}\n{'-' * 4096}"
    for key, said_first, reused in ((None, long, False), ("chat-1", long, True), (None, longer, True)):
        first = [{"role": "user", "content": f"Chat {key}. {said_first}"}]
        keyed = {"prompt_cache_key": key} if key else {}
        asked = {"model": model, "messages": first, "max_tokens": 8, "temperature": 0, **keyed}
        said = beside_another(functools.partial(client.chat.completions.create, **asked))
        later = [
            *first,
            {"role": "assistant", "content": said.choices[0].message.content},
            {"role": "user", "content": "Again."},
        ]
        went_on = client.chat.completions.create(model=model, messages=later, max_tokens=8, temperature=0)
        cached = went_on.usage.prompt_tokens_details.cached_tokens
        assert (cached >= said.usage.prompt_tokens - 4) is reused
