"""Tool calling on the default SmolLM2, whose template knows nothing of tools: grammar-enforced calls."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import openai
import pytest

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
TOOLS = [WEATHER, ADD]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
WEATHER_ONLY: Any = {"type": "function", "function": {"name": "get_weather"}}
ASK = [SYSTEM, {"role": "user", "content": "What is the weather in Paris?"}]


def assert_valid_calls(calls: Any, names: set[str], finish_reason: str = "tool_calls") -> None:
    """Every call validates; when the answer ran out of tokens, the last call may be cut short, as with
    OpenAI."""
    assert calls
    assert finish_reason in ("tool_calls", "length")
    for call in calls[:-1] if finish_reason == "length" else calls:
        assert call.id.startswith("call_")
        assert call.type == "function"
        assert call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


@pytest.mark.one_face
@pytest.mark.parametrize(
    ("choice", "names"),
    [
        ("required", {"get_weather", "add"}),
        ({"type": "function", "function": {"name": "add"}}, {"add"}),
        ({"type": "function", "function": {"name": "get_weather"}}, {"get_weather"}),
    ],
)
@pytest.mark.slow
def test_forced_tool_choices_always_give_valid_calls(
    client: openai.OpenAI, choice: Any, names: set[str]
) -> None:
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=ASK, tools=TOOLS, tool_choice=choice, max_tokens=200, seed=1
    )
    message, finish = reply.choices[0].message, reply.choices[0].finish_reason
    # A named tool is called once; under `required`, parallel calls may go on until `max_tokens`, as this
    # small model sampling at temperature 1 now and then does (on which seed depends on the CPU's numerics).
    assert finish == "tool_calls" if choice != "required" else finish in ("tool_calls", "length")
    assert message.content is None
    assert_valid_calls(message.tool_calls, names, finish)


@pytest.mark.one_face
@pytest.mark.slow
def test_auto_gives_either_a_valid_call_or_text(client: openai.OpenAI) -> None:
    for seed in (1, 2, 3):
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=ASK, tools=TOOLS, max_tokens=200, seed=seed
        )
        choice = reply.choices[0]
        if choice.message.tool_calls:
            assert_valid_calls(choice.message.tool_calls, set(SCHEMAS), choice.finish_reason)
        else:
            assert choice.message.content
            assert not choice.message.content.lstrip().startswith("{")


@pytest.mark.one_face
def test_none_answers_in_text(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=ASK, tools=TOOLS, tool_choice="none", max_tokens=20
    )
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].message.content


@pytest.mark.one_face
@pytest.mark.parametrize("budget", [4, 8, 12, 16, 20, 27])
@pytest.mark.slow
def test_an_answer_cut_by_max_tokens_keeps_what_was_generated(client: openai.OpenAI, budget: int) -> None:
    # Agent loops give each turn what is left of a budget; what was generated must come back, as OpenAI
    # returns it, never an empty message that counts its tokens as used.
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=ASK, tools=TOOLS, tool_choice=WEATHER_ONLY, max_tokens=budget
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "length"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == budget
    assert choice.message.content is None
    if budget >= 12:  # ten tokens of JSON framing come before a call's name begins
        (call,) = choice.message.tool_calls or []
        assert call.id.startswith("call_")
        assert call.function.name
        assert "get_weather".startswith(call.function.name)
        if budget >= 16:
            assert call.function.name == "get_weather"
        if budget >= 20:
            assert call.function.arguments.startswith('{"city"')
    text = client.chat.completions.create(
        model="gpt-4o-mini", messages=ASK, tools=TOOLS, max_tokens=budget, tool_choice="none"
    )
    assert text.choices[0].message.content  # cut or not, the text so far


def test_a_streamed_call_cut_by_max_tokens_has_its_name(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=ASK, tools=TOOLS, tool_choice=WEATHER_ONLY, max_tokens=13, stream=True
    )
    chunks = list(stream)
    calls = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
    assert calls
    assert calls[0].function is not None
    assert calls[0].function.name
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


@pytest.mark.one_face
@pytest.mark.slow
def test_parallel_tool_calls_false_allows_one_call(client: openai.OpenAI) -> None:
    for seed in (1, 2):
        reply = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=ASK,
            tools=TOOLS,
            tool_choice="required",
            parallel_tool_calls=False,
            max_tokens=200,
            seed=seed,
        )
        assert len(reply.choices[0].message.tool_calls or []) == 1


@pytest.mark.slow
def test_streamed_calls_rebuild_exactly_the_whole_message(client: openai.OpenAI) -> None:
    kwargs: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": ASK,
        "tools": TOOLS,
        "tool_choice": "required",
        "max_tokens": 200,
        "seed": 7,
        "temperature": 0,
    }
    answer = client.chat.completions.create(**kwargs).choices[0]
    whole = answer.message
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    pieces = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert pieces[0].id
    assert pieces[0].type == "function"
    assert pieces[0].function.name
    assert all(p.index is not None for p in pieces)
    assert all(p.id is None for p in pieces if p is not pieces[0] and p.index == pieces[0].index)
    assert len(pieces) > 2  # the arguments arrive in pieces
    # Under `required` this small model may go on calling until max_tokens (whether it does at temperature 0
    # depends on the CPU's numerics): the stream ends as the whole answer does, cut where it was cut.
    assert answer.finish_reason in ("tool_calls", "length")
    assert chunks[-1].choices[0].finish_reason == answer.finish_reason
    rebuilt = {p.index: "" for p in pieces}
    for p in pieces:
        rebuilt[p.index] += p.function.arguments or ""
    assert [rebuilt[i] for i in sorted(rebuilt)] == [c.function.arguments for c in whole.tool_calls or []]


def test_the_sdk_stream_helper_accumulates_tool_calls(http_client: openai.OpenAI) -> None:
    with http_client.chat.completions.stream(
        model="gpt-4o-mini",
        messages=ASK,
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,  # one call, so never cut by max_tokens (which the helper raises on)
        max_tokens=200,
        seed=3,
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert final.choices[0].finish_reason == "tool_calls"
    assert_valid_calls(final.choices[0].message.tool_calls, set(SCHEMAS))


@pytest.mark.one_face
@pytest.mark.slow
def test_a_conversation_with_tool_results_continues(client: openai.OpenAI) -> None:
    messages: list[Any] = [
        SYSTEM,
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21, "sky": "sunny"}'},
        {"role": "user", "content": "Thanks."},
    ]
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, tools=TOOLS, tool_choice="none", max_tokens=30
    )
    assert reply.choices[0].message.content
    follow = client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, tools=TOOLS, tool_choice="required", max_tokens=200
    )
    assert_valid_calls(follow.choices[0].message.tool_calls, set(SCHEMAS), follow.choices[0].finish_reason)


@pytest.mark.one_face
def test_an_answer_after_calls_with_no_tools_offered_is_text_not_call_markup(client: openai.OpenAI) -> None:
    # As when an agent loop's last round may call nothing more: past calls shown as JSON were copied by the
    # model as its answer (8 answers in 8), which then reached the user as text.
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris and in Rome?"}]
    for number, (city, sky) in enumerate((("Paris", "Sunny, 21 C"), ("Rome", "Rain, 14 C"))):
        call = {"name": "get_weather", "arguments": json.dumps({"city": city})}
        messages.append(
            {"role": "assistant", "tool_calls": [{"id": f"c{number}", "type": "function", "function": call}]}
        )
        messages.append({"role": "tool", "tool_call_id": f"c{number}", "content": sky})
    for seed in range(4):
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, max_tokens=40, temperature=0.7, seed=seed
        )
        text = reply.choices[0].message.content or ""
        assert text.strip()
        assert "tool_calls" not in text
        assert '"name"' not in text


@pytest.mark.one_face
def test_legacy_functions_answer_with_function_call(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=ASK,
        functions=[WEATHER["function"]],  # type: ignore[list-item]
        function_call={"name": "get_weather"},
        max_tokens=200,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "function_call"
    assert choice.message.function_call is not None
    assert choice.message.function_call.name == "get_weather"
    jsonschema.validate(json.loads(choice.message.function_call.arguments), SCHEMAS["get_weather"])


@pytest.mark.one_face
@pytest.mark.slow
def test_schemas_with_refs_and_nesting_are_enforced(client: openai.OpenAI) -> None:
    parameters = {
        "type": "object",
        "properties": {"order": {"$ref": "#/$defs/Order"}},
        "required": ["order"],
        "$defs": {
            "Order": {
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "items": {"$ref": "#/$defs/Item"},
                        "minItems": 1,
                        "maxItems": 3,
                    },
                    "express": {"type": "boolean"},
                },
                "required": ["items", "express"],
            },
            "Item": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 20}, "count": {"type": "integer"}},
                "required": ["name", "count"],
            },
        },
    }
    tool = {"type": "function", "function": {"name": "place_order", "parameters": parameters}}
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[SYSTEM, {"role": "user", "content": "Order two apples, express."}],
        tools=[tool],  # type: ignore[list-item]
        tool_choice="required",
        max_tokens=300,
    )
    calls = reply.choices[0].message.tool_calls or []
    assert calls
    jsonschema.validate(json.loads(calls[0].function.arguments), parameters)


@pytest.mark.parametrize(
    ("tools", "choice", "param"),
    [
        ([WEATHER], {"type": "function", "function": {"name": "nope"}}, "tool_choice"),
        ([WEATHER], "sometimes", "tool_choice"),
        ([WEATHER, WEATHER], "auto", "tools"),
        (
            [{"type": "function", "function": {"name": "x", "parameters": {"type": "object", "not": {}}}}],
            "auto",
            "tools",
        ),
        ([{"type": "retrieval"}], "auto", "tools[0]"),
    ],
)
def test_bad_tool_requests_are_400s_naming_the_part(
    client: openai.OpenAI, tools: Any, choice: Any, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=ASK, tools=tools, tool_choice=choice, max_tokens=5
        )
    assert caught.value.param == param


def test_tool_choice_without_tools_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=ASK, tool_choice="required", max_tokens=5
        )
    assert caught.value.param == "tool_choice"


def test_a_client_that_leaves_a_streamed_tool_call_frees_the_model(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=ASK,
        tools=TOOLS,
        tool_choice="required",
        max_tokens=400,
        stream=True,
        n=2,
    )
    next(iter(stream))
    stream.close()
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=ASK, max_tokens=3)
    assert reply.choices[0].message.content is not None


def test_json_nested_past_the_reader_s_depth_in_a_string_is_text_or_a_400(client: openai.OpenAI) -> None:
    # A call's arguments, and vLLM's `guided_json`, are strings the server reads as JSON: nested past
    # Python's stack, `json` raised a RecursionError there (a 500 over HTTP, and in-process the caller's).
    deep = "[" * 1100 + "]" * 1100  # past the reader's 1,000 levels, within the model's context
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": deep}}
    turns: Any = [
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    ]
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=turns, tools=[ADD], max_tokens=2)
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls")
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=turns[:1], max_tokens=2, extra_body={"guided_json": deep}
        )
    assert refused.value.body["param"] == "guided_json"  # type: ignore[index]
