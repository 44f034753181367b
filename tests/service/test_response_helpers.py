"""The Responses API's helpers for long agent sessions, on both faces: `responses.input_tokens.count` (the
count a turn's `usage.input_tokens` then shows), `responses.compact` (a conversation shrunk into its user
messages and a compaction item that a later turn takes as input), and server-side compaction's threshold on
a real model (the rest of it in `test_server_compaction.py`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.service.test_responses import WEATHER


def as_input(output: list[Any]) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True, warnings=False) for item in output]


def test_a_compaction_item_reaches_the_next_turn_as_the_summary(recall: Any) -> None:
    one = recall.responses.create(model="recall", input="my colour is teal")
    compacted = recall.responses.compact(model="recall", previous_response_id=one.id, input="and yours?")
    assert compacted.object == "response.compaction"
    kinds = [(item.type, getattr(item, "role", None)) for item in compacted.output]
    assert kinds == [("message", "user"), ("message", "user"), ("compaction", None)]
    summary = compacted.output[-1].encrypted_content
    assert "my colour is teal" in summary  # what the summariser was shown (the recall model echoes it)
    assert compacted.usage.output_tokens > 0
    # As written: the kept messages and the object with no optional field null (the SDK's type reads a user's
    # message as an output message, whose id, status and phase would otherwise be written null).
    raw = json.loads(
        recall.responses.with_raw_response.compact(model="recall", previous_response_id=one.id).text
    )
    assert [None in item.values() for item in raw["output"]] == [False] * 2
    assert "image" not in raw
    assert None not in raw["usage"]["input_tokens_details"].values()
    later = {"role": "user", "content": "what now"}
    after = recall.responses.create(model="recall", input=[*as_input(compacted.output), later])
    said = after.output_text.split(" / ")
    assert said[0] == "user: my colour is teal\n\nand yours?"  # the user's two messages, joined as one turn
    assert said[1].startswith("assistant: Summary of the conversation so far")
    assert said[-1] == "user: what now"


@pytest.fixture
def recall(tiny: Any) -> Any:
    """A model that answers with the conversation it was given."""
    return tiny


@pytest.mark.one_face
@pytest.mark.models
def test_the_count_is_the_input_tokens_the_turn_then_uses(client: Any) -> None:
    asked = {
        "model": "gpt-4.1-mini",
        "instructions": "Be brief.",
        "input": "What is the weather in Paris?",
        "tools": [WEATHER],
    }
    counted = client.responses.input_tokens.count(**asked)
    made = client.responses.create(**asked, max_output_tokens=16)
    assert counted.object == "response.input_tokens"
    assert counted.input_tokens == made.usage.input_tokens
    later = {"model": "gpt-4.1-mini", "previous_response_id": made.id, "input": "And in Rome?"}
    assert (
        client.responses.input_tokens.count(**later).input_tokens
        == client.responses.create(**later, max_output_tokens=16).usage.input_tokens
    )


@pytest.mark.one_face
@pytest.mark.models
def test_a_compacted_conversation_goes_on_on_fewer_tokens(client: Any) -> None:
    model = "gpt-4.1-mini"
    said = ["My name is Ada and I live in Oslo. Tell me about Oslo.", "I like cats. Tell me about cats."]
    one = client.responses.create(model=model, input=said[0], max_output_tokens=120)
    two = client.responses.create(
        model=model, previous_response_id=one.id, input=said[1], max_output_tokens=120
    )
    compacted = client.responses.compact(model=model, previous_response_id=two.id)
    assert [item.type for item in compacted.output] == ["message", "message", "compaction"]
    assert [item.content[0].text for item in compacted.output[:2]] == said  # the user's words, whole
    assert compacted.output[-1].encrypted_content.strip()
    question = {"role": "user", "content": "Which city do I live in?"}
    went_on = client.responses.create(
        model=model, input=[*as_input(compacted.output), question], max_output_tokens=30
    )
    uncompacted = client.responses.input_tokens.count(
        model=model, previous_response_id=two.id, input=[question]
    )
    assert went_on.status in ("completed", "incomplete")
    assert went_on.output_text
    assert went_on.usage.input_tokens < uncompacted.input_tokens


@pytest.mark.one_face
@pytest.mark.models
def test_a_turn_compacts_exactly_from_its_threshold(client: Any) -> None:
    """Server-side compaction on a real model: the threshold is the count `input_tokens` gives, so a turn
    whose input is that many tokens compacts first and one a token short of it does not."""
    model = "gpt-4.1-mini"
    one = client.responses.create(model=model, input="My name is Ada. I live in Oslo.", max_output_tokens=40)
    later = {"model": model, "previous_response_id": one.id, "input": "Where do I live?"}
    counted = client.responses.input_tokens.count(**later).input_tokens
    short = client.responses.create(
        **later,
        max_output_tokens=16,
        context_management=[{"type": "compaction", "compact_threshold": counted + 1}],
    )
    assert [item.type for item in short.output] == ["message"]
    assert short.usage.input_tokens == counted
    made = client.responses.create(
        **later,
        max_output_tokens=16,
        context_management=[{"type": "compaction", "compact_threshold": counted}],
    )
    assert [item.type for item in made.output][:1] == ["compaction"]
    assert made.output[0].encrypted_content
    # The conversation goes on from the compaction item: as a client that drops what came before it sends.
    question = {"role": "user", "content": "And then?"}
    chained = client.responses.input_tokens.count(model=model, previous_response_id=made.id, input=[question])
    pruned = client.responses.input_tokens.count(model=model, input=[*as_input(made.output), question])
    assert chained.input_tokens == pruned.input_tokens
