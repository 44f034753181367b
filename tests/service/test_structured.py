"""Structured output enforced by the decoder: json_object, json_schema, vLLM's guided decoding."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import openai
import pytest

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer in JSON."}
SCHEMAS: dict[str, dict[str, Any]] = {
    "enum and integer": {
        "type": "object",
        "properties": {"colour": {"enum": ["red", "green", "blue"]}, "count": {"type": "integer"}},
        "required": ["colour", "count"],
        "additionalProperties": False,
    },
    "nested with arrays": {
        "type": "object",
        "properties": {
            "person": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 30},
                    "pets": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3},
                },
                "required": ["name", "pets"],
            },
            "happy": {"type": "boolean"},
        },
        "required": ["person", "happy"],
    },
    "refs": {
        "type": "object",
        "properties": {"home": {"$ref": "#/$defs/Place"}, "work": {"$ref": "#/$defs/Place"}},
        "required": ["home", "work"],
        "$defs": {
            "Place": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 30}, "floor": {"type": "integer"}},
                "required": ["city", "floor"],
            }
        },
    },
}


@pytest.mark.one_face
@pytest.mark.parametrize("name", list(SCHEMAS))
@pytest.mark.slow
def test_json_schema_output_always_validates(client: openai.OpenAI, name: str) -> None:
    schema = SCHEMAS[name]
    for seed in (1, 2):
        reply = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[SYSTEM, {"role": "user", "content": "Describe a person and their pets."}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": schema, "strict": True},
            },
            max_tokens=300,
            seed=seed,
        )
        assert reply.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(reply.choices[0].message.content or ""), schema)


@pytest.mark.one_face
def test_bounds_of_numbers_and_formats_of_strings_hold_the_answer(client: openai.OpenAI) -> None:
    """Bounds on a `number` (pydantic's `Field(ge=…)` on a float), multiples, and string formats (`EmailStr`,
    dates), as llguidance enforces them; once refused, as llama.cpp's grammars of old could not. Every
    value is bounded, so the answer ends whatever the model writes."""
    schema = {
        "type": "object",
        "properties": {
            "price": {"type": "number", "minimum": 1000, "exclusiveMaximum": 2000, "multipleOf": 0.25},
            "dozen": {"type": "integer", "multipleOf": 12, "minimum": 1, "maximum": 120},
            "contact": {"type": "string", "format": "email", "maxLength": 40},
            "day": {"type": "string", "format": "date"},
        },
        "required": ["price", "dozen", "contact", "day"],
    }
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[SYSTEM, {"role": "user", "content": "A price of 3, a count of 5, an address and a day."}],
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
        max_tokens=120,
        temperature=0,
    )
    assert reply.choices[0].finish_reason == "stop"
    said = json.loads(reply.choices[0].message.content or "")
    jsonschema.validate(said, schema, format_checker=jsonschema.FormatChecker())


@pytest.mark.one_face
def test_a_record_as_zod_writes_it_is_held(client: openai.OpenAI) -> None:
    """zod writes every record with `propertyNames: {"type": "string"}`, which llguidance does not implement
    and every JSON object satisfies: the schema is held without it, as a response format and as a tool's
    parameters, where it was a 400."""
    numbers = {"type": "number"}
    record = {"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": numbers}
    schema = {"type": "object", "properties": {"counts": record}, "required": ["counts"]}
    said = [SYSTEM, {"role": "user", "content": "Count the fruit."}]
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=said, max_tokens=60, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    )  # fmt: skip
    assert re.match(r'\{\s*"counts"', reply.choices[0].message.content or "")  # its one key, any layout
    tool = {"type": "function", "function": {"name": "count", "parameters": schema}}
    called = client.chat.completions.create(
        model="gpt-4o-mini", messages=said, max_tokens=60, temperature=0, tools=[tool], tool_choice="required"
    )  # type: ignore[list-item]
    assert (called.choices[0].message.tool_calls or [])[0].function.name == "count"  # type: ignore[union-attr]


@pytest.mark.one_face
def test_json_object_output_parses(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            SYSTEM,
            {"role": "user", "content": 'Reply with a JSON object whose only key is "colour".'},
        ],
        response_format={"type": "json_object"},
        max_tokens=200,
        temperature=0,
    )
    # A vaguer prompt lets SmolLM2 write JSON past any max_tokens, which is cut off as OpenAI's would be.
    assert reply.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(reply.choices[0].message.content or ""), dict)


def test_the_sdk_parse_helper_gets_a_pydantic_object(client: openai.OpenAI) -> None:
    from pydantic import BaseModel, Field

    class Colour(BaseModel):  # bounded strings: a 135M model may otherwise write one past max_tokens
        name: str = Field(max_length=24)
        hex_code: str = Field(max_length=7)

    parsed = client.chat.completions.parse(
        model="gpt-4o-mini",
        messages=[SYSTEM, {"role": "user", "content": "Describe the colour red."}],
        response_format=Colour,
        max_tokens=200,
        temperature=0,
    )
    assert isinstance(parsed.choices[0].message.parsed, Colour)


@pytest.mark.parametrize(
    ("schema", "part"),
    [
        # What llguidance (which enforces the schema in llama.cpp) does not implement or know.
        (
            {"type": "object", "properties": {"a": {"type": "string", "format": "credit-card"}}},
            "properties.a.format: the string format `credit-card`",
        ),
        ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "schema.uniqueItems"),
        ({"type": "object", "properties": {"a": {"type": "array", "contains": {}}}}, "properties.a.contains"),
        # What it cannot compile, which llama.cpp once answered held to nothing: a regular expression it does
        # not read, a schema no value satisfies.
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "(("}}},
            "properties.a.pattern",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?=.*[A-Z]).+$"}}},
            "properties.a.pattern: the regular expression cannot be enforced: look-around",
        ),
        ({"type": "string", "minLength": 5, "maxLength": 2}, "schema cannot be enforced: Unsatisfiable"),
        # Malformed, each once a 500: a type that is no name, values llguidance's compiler panics on (its
        # message about the value cut inside a character).
        ({"type": {}}, "schema.type: unknown type `{}`"),
        ({"required": [["a" * 79 + "\U00060d4a" * 5]]}, "schema.required must be a list of property names"),
        ({"minItems": ["a" * 79 + "\U00060d4a" * 5]}, "schema.minItems must be a whole number"),
    ],
)
def test_a_schema_the_decoder_cannot_enforce_is_a_400_naming_the_part(
    client: openai.OpenAI, schema: dict[str, Any], part: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[SYSTEM, {"role": "user", "content": "Hi"}],
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
            max_tokens=5,
        )
    assert caught.value.param == "response_format"
    assert part in caught.value.message


PANICS = '%llguidance {}\nstart: %json {"required": [["' + "a" * 79 + "\U00060d4a" * 5 + '"]]}'
# A tool no call of which satisfies its parameters (`a` at least 3 characters long and at most 1).
UNSATISFIABLE = {"type": "object", "properties": {"a": {"type": "string", "minLength": 3, "maxLength": 1}}}


@pytest.mark.parametrize(
    ("asked", "param", "said"),
    [
        (
            {"tool_choice": "required", "tools": [{"type": "function", "function": {
                "name": "f", "parameters": {**UNSATISFIABLE, "required": ["a"]},
            }}]},
            "tools",
            "tools[0].function.parameters cannot be enforced: Unsatisfiable",
        ),
        ({"extra_body": {"guided_grammar": "%llguidance {}\nstart: /((/"}}, "guided_grammar", "unclosed"),
        # What llguidance's compiler panics on (a Rust panic, a BaseException in Python: once a 500).
        ({"extra_body": {"guided_grammar": PANICS}}, "guided_grammar", "llguidance cannot read it"),
    ],
    ids=["a tool's parameters", "a grammar", "a grammar llguidance panics on"],
)  # fmt: skip
def test_what_the_answer_cannot_be_held_to_is_a_400_not_an_answer_held_to_nothing(
    client: openai.OpenAI, asked: dict[str, Any], param: str, said: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], max_tokens=5, **asked
        )
    assert caught.value.param == param
    assert said in caught.value.message


@pytest.mark.one_face
def test_guided_choice_picks_one_of_the_choices_on_both_endpoints(client: openai.OpenAI) -> None:
    choices = ["yes", "no", "maybe so"]
    chat = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Is the sky blue?"}],
        max_tokens=10,
        extra_body={"guided_choice": choices},
    )
    assert chat.choices[0].message.content in choices
    legacy = client.completions.create(
        model="gpt-4o-mini",
        prompt="Is the sky blue? Answer:",
        max_tokens=10,
        extra_body={"guided_choice": choices},
    )
    assert legacy.choices[0].text in choices


@pytest.mark.one_face
def test_guided_regex_output_fully_matches(client: openai.OpenAI) -> None:
    pattern = r"[A-Z][a-z]{2,8} \d{1,3}(\.\d)?"
    for seed in (1, 2, 3):
        reply = client.completions.create(
            model="gpt-4o-mini",
            prompt="A city and its temperature:",
            max_tokens=20,
            seed=seed,
            extra_body={"guided_regex": pattern},
        )
        assert re.fullmatch(pattern, reply.choices[0].text), reply.choices[0].text


@pytest.mark.one_face
def test_guided_json_validates(client: openai.OpenAI) -> None:
    schema = SCHEMAS["enum and integer"]
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[SYSTEM, {"role": "user", "content": "A colour and a count."}],
        max_tokens=100,
        extra_body={"guided_json": schema},
    )
    jsonschema.validate(json.loads(reply.choices[0].message.content or ""), schema)


def test_a_regex_with_lookahead_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(
            model="gpt-4o-mini", prompt="x", max_tokens=5, extra_body={"guided_regex": "a(?=b)"}
        )
    assert caught.value.param == "guided_regex"


def test_a_choice_the_vocabulary_cannot_spell_is_a_400(client: openai.OpenAI) -> None:
    # U+703EF is unassigned; llama.cpp's grammar finds no token for it (found by schemathesis).
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Pick"}],
            max_tokens=10,
            extra_body={"guided_choice": ["\U000703ef"]},
        )
    assert caught.value.code == "unsatisfiable_constraint"
    assert client.models.list().data  # and the server goes on
