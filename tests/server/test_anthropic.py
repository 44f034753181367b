"""Anthropic's Messages API, through the `anthropic` SDK against `modelport serve`: whole and streamed
messages (with the SDK's stream helpers), a tool round trip, structured output, thinking blocks signed and
given back, token counts, the models' list, keys as `x-api-key`, and errors in Anthropic's shape. What is
checked is what the server decides (shapes, stop reasons, grammar-bound output, what reaches a model), never
a model's words: SmolLM2 for the grammar's checks, tiny predictors (`ponder` thinks) for the rest."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import jsonschema
import pytest

from tests.support import documents
from tests.support.configs import tiny_models
from tests.support.faces import Faces, faces
from tests.support.lazy import Imported

if TYPE_CHECKING:
    import anthropic
    from anthropic import types
else:  # the SDK imported by the first test that uses it, not at collection
    anthropic, types = Imported("anthropic"), Imported("anthropic.types")

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
KEY = "sk-anthropic-face"
GREEDY = {"temperature": 0}  # Anthropic's field, which its newest SDK no longer types
# An answer held to JSON: its grammar makes the first tokens, so every answer has some, whatever the model
# would have said (an answer ended at once would have none).
BRIEF: Any = {
    "format": {"type": "json_schema", "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    """Tiny predictors (`ponder` thinks, `reverse` answers from its input, `tools` calls the first tool it is
    offered) behind a key."""
    database = str(tmp_path_factory.mktemp("anthropic") / "state.db")
    settings = tiny_models(
        database, KEY, ponder="ponder_chat", reverse="reverse_chat", recall="recall_chat", tools="tool_chat",
        vllm="ponder_as_vllm_chat",
    )  # fmt: skip
    with faces(settings, api_key=KEY) as served:
        yield served


def sdk(served: Faces, key: str = KEY) -> anthropic.Anthropic:
    """Anthropic's SDK pointed at the server, as `ANTHROPIC_BASE_URL` points Claude Code at it."""
    return anthropic.Anthropic(base_url=served.url, api_key=key, max_retries=0, timeout=120)


# SmolLM2 (the default chat model): what its grammar decides.


def test_a_claude_model_name_reaches_the_default_chat_model_and_answers_a_message(server: Faces) -> None:
    client = sdk(server, "unused")
    answer = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=6, system="Answer briefly.", messages=ASK, extra_body=GREEDY,
        output_config=BRIEF,
    )  # fmt: skip
    assert isinstance(answer, types.Message)
    assert answer.model == "smollm2-135m-instruct"
    assert answer.id.startswith("msg_")
    assert answer.role == "assistant"
    assert answer.stop_reason in ("end_turn", "max_tokens")
    assert all(isinstance(block, types.TextBlock) for block in answer.content)
    assert answer.usage.input_tokens > 0
    assert 0 < answer.usage.output_tokens <= 6
    raw = httpx.post(
        f"{server.url}/v1/messages",
        json={"model": "claude-haiku-4-5", "max_tokens": 2, "messages": ASK},
        headers={"anthropic-version": "2023-06-01"},
        timeout=60,
    ).json()
    # Anthropic's wire: the stop fields always present, nothing of OpenAI's.
    assert raw["type"] == "message"
    assert "stop_sequence" in raw
    assert raw["stop_reason"] is not None
    assert "choices" not in raw
    assert "object" not in raw


def test_a_streamed_message_is_anthropic_s_events_and_folds_into_the_whole(server: Faces) -> None:
    client = sdk(server, "unused")
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=12, messages=ASK, extra_body=GREEDY, output_config=BRIEF
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    assert kinds[-2] == "message_delta"
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == len(final.content)
    assert final.stop_reason in ("end_turn", "max_tokens")
    assert 0 < final.usage.output_tokens <= 12
    assert final.usage.input_tokens > 0


def test_a_tool_round_trip(server: Faces) -> None:
    client = sdk(server, "unused")
    forced = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=60, messages=ASK, tools=[WEATHER],
        tool_choice={"type": "tool", "name": "get_weather"}, extra_body=GREEDY,
    )  # fmt: skip
    assert forced.stop_reason == "tool_use"
    (call,) = [block for block in forced.content if isinstance(block, types.ToolUseBlock)]
    assert call.name == "get_weather"
    assert call.id
    jsonschema.validate(call.input, WEATHER["input_schema"])
    # The call and its result given back: the model answers in text, as `none` asks.
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "Sunny, 21 °C."}
    turns = [*ASK, {"role": "assistant", "content": forced.content}, {"role": "user", "content": [result]}]
    answered = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=8, tools=[WEATHER], tool_choice={"type": "none"},
        messages=turns, extra_body=GREEDY,
    )  # fmt: skip
    assert answered.stop_reason in ("end_turn", "max_tokens")
    assert not [block for block in answered.content if isinstance(block, types.ToolUseBlock)]
    # Streamed, the call's input comes as JSON pieces that join into the whole.
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=60, messages=ASK, tools=[WEATHER],
        tool_choice={"type": "any"}, extra_body=GREEDY,
    ) as stream:  # fmt: skip
        pieces = [
            e.delta.partial_json
            for e in stream
            if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
        ]
        final = stream.get_final_message()
    (streamed,) = [block for block in final.content if isinstance(block, types.ToolUseBlock)]
    assert json.loads("".join(pieces)) == streamed.input
    jsonschema.validate(streamed.input, WEATHER["input_schema"])


def test_anthropic_s_own_client_tools_are_called_with_their_documented_inputs(server: Faces) -> None:
    """The text editor, bash and memory tools are declared by type and name alone, as Anthropic's SDK and
    agents declare them; a call of one holds to the inputs Anthropic documents for it."""
    from modelport.server.anthropic.defined_tools import DEFINED

    tools: Any = [
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 10000},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "memory_20250818", "name": "memory"},
    ]
    ask = [{"role": "user", "content": "Fix the typo in /repo/README.md."}]
    for tool in tools:
        called = sdk(server, "unused").messages.create(
            model="claude-sonnet-4-6", max_tokens=80, messages=ask, tools=tools, extra_body=GREEDY,
            tool_choice={"type": "tool", "name": tool["name"]},
        )  # fmt: skip
        assert called.stop_reason in ("tool_use", "max_tokens")
        calls = [block for block in called.content if isinstance(block, types.ToolUseBlock)]
        assert [call.name for call in calls] == [tool["name"]]
        if called.stop_reason == "tool_use":
            jsonschema.validate(calls[0].input, DEFINED[tool["type"]].schema)


def test_output_config_s_format_holds_the_answer_to_its_schema(server: Faces) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}},
        "required": ["city"],
    }
    answer = sdk(server, "unused").messages.create(
        model="claude-sonnet-4-6", max_tokens=40, messages=ASK, extra_body=GREEDY,
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )  # fmt: skip
    (block,) = answer.content
    assert isinstance(block, types.TextBlock)
    jsonschema.validate(json.loads(block.text), schema)


def test_count_tokens_is_what_the_message_would_use(server: Faces) -> None:
    client = sdk(server, "unused")
    asked = {"model": "claude-sonnet-4-6", "messages": ASK, "system": "Be brief.", "tools": [WEATHER]}
    counted = client.messages.count_tokens(**asked)  # type: ignore[arg-type]
    used = client.messages.create(max_tokens=1, **asked)  # type: ignore[arg-type]
    # Anthropic counts the prompt read from the cache beside the rest: together, the count.
    assert counted.input_tokens == used.usage.input_tokens + (used.usage.cache_read_input_tokens or 0) > 0
    fewer = client.messages.count_tokens(model="claude-sonnet-4-6", messages=ASK)
    assert fewer.input_tokens < counted.input_tokens  # the system prompt and the tool count


# Tiny predictors: thinking, keys, errors, the models' list.
# `vllm` streams its thinking as `reasoning` (vLLM since 0.10, OpenRouter), `ponder` as `reasoning_content`.
THINKERS = ["ponder", "vllm"]


@pytest.mark.parametrize("model", THINKERS)
def test_thinking_is_a_signed_block_given_back_to_the_model(tiny: Faces, model: str) -> None:
    client = sdk(tiny)
    thought = client.messages.create(
        model=model, max_tokens=100, messages=[{"role": "user", "content": "two plus three"}],
        thinking={"type": "enabled", "budget_tokens": 2048},
    )  # fmt: skip
    first, answer = thought.content
    assert isinstance(first, types.ThinkingBlock)
    assert isinstance(answer, types.TextBlock)
    assert first.thinking == "pondering two plus three"
    assert first.signature
    assert answer.text == "nothing given back"
    # Given back in the next turn, the thinking reaches the model as the assistant's reasoning.
    turns = [
        {"role": "user", "content": "two plus three"},
        {"role": "assistant", "content": thought.content},
        {"role": "user", "content": "and four"},
    ]
    again = client.messages.create(model=model, max_tokens=100, messages=turns)  # type: ignore[arg-type]
    assert again.content[-1].text == "pondering two plus three"  # type: ignore[union-attr]
    # A thinking block changed on the way is refused, naming it.
    forged = {"type": "thinking", "thinking": "pondering something else", "signature": first.signature}
    turns[1] = {"role": "assistant", "content": [forged, {"type": "text", "text": answer.text}]}
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model=model, max_tokens=100, messages=turns)  # type: ignore[arg-type]
    assert refused.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "messages[1].content[0].signature" in refused.value.message


@pytest.mark.parametrize("model", THINKERS)
def test_streamed_thinking_ends_with_its_signature(tiny: Faces, model: str) -> None:
    with sdk(tiny).messages.stream(
        model=model, max_tokens=100, messages=[{"role": "user", "content": "two plus three"}],
        thinking={"type": "enabled", "budget_tokens": 2048},
    ) as stream:  # fmt: skip
        deltas = [(e.index, e.delta.type) for e in stream if e.type == "content_block_delta"]
        final = stream.get_final_message()
    kinds = [kind for _, kind in deltas]
    # Thinking deltas, then the signature closing block 0, then the answer's text in block 1.
    assert kinds.index("signature_delta") == kinds.count("thinking_delta")
    assert {index for index, kind in deltas if kind == "text_delta"} == {1}
    first = final.content[0]
    assert isinstance(first, types.ThinkingBlock)
    assert first.signature
    assert first.thinking == "pondering two plus three"


def test_keys_come_as_x_api_key_and_errors_in_anthropic_s_shape(tiny: Faces) -> None:
    with pytest.raises(anthropic.AuthenticationError) as wrong:
        sdk(tiny, "sk-wrong").messages.create(model="reverse", max_tokens=4, messages=ASK)
    assert wrong.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": wrong.value.body["error"]["message"]},
    }  # type: ignore[index]
    with pytest.raises(anthropic.NotFoundError) as unknown:
        sdk(tiny).messages.create(model="no-such-model", max_tokens=4, messages=ASK)
    assert unknown.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    missing = httpx.post(
        f"{tiny.url}/v1/messages", json={"model": "reverse", "messages": ASK}, headers={"x-api-key": KEY}
    )
    assert missing.status_code == 400
    assert missing.json()["type"] == "error"
    assert "max_tokens" in missing.json()["error"]["message"]
    assert httpx.post(f"{tiny.url}/v1/messages", content=b"{", headers={"x-api-key": KEY}).status_code == 400
    # The key as OpenAI's SDKs send it works too, and the OpenAI face keeps OpenAI's error shape.
    bearer = httpx.post(
        f"{tiny.url}/v1/messages",
        json={"model": "reverse", "max_tokens": 4, "messages": ASK},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert bearer.status_code == 200
    assert bearer.json()["content"][0]["text"] == "Paris? in weather the"
    openai_shape = httpx.post(f"{tiny.url}/v1/chat/completions", json={}, headers={"x-api-key": KEY})
    assert set(openai_shape.json()) == {"error"}


@pytest.mark.parametrize(
    ("tool", "param", "said"),
    [
        ({"type": "bash_20250124", "name": "shell"}, "tools[0].name", "is named `bash`, not `shell`"),
        ({"type": "text_editor_20990101", "name": "x"}, "tools[0].type", "not a tool type"),
        ({"name": "get_weather"}, "tools[0].input_schema", "Missing required parameter"),
    ],
)
def test_a_tool_this_server_cannot_serve_is_a_400_that_says_why(
    tiny: Faces, tool: dict[str, str], param: str, said: str
) -> None:
    refused = httpx.post(
        f"{tiny.url}/v1/messages",
        json={"model": "reverse", "max_tokens": 4, "messages": ASK, "tools": [tool]},
        headers={"x-api-key": KEY},
    )
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert message.startswith(param) or f"'{param}'" in message  # named once, first or where it is said
    assert said in message


NONSENSE = {"type": "object", "properties": {"a": {"type": "nonsense"}}}
LONG = "x" * 200_001  # past the default `[limits] input_chars`
SEARCH = {"type": "web_search_20250305", "name": "web_search"}  # a server tool: no chat tool of its own
LONG_TURN = [
    *ASK,
    {"role": "assistant", "content": "Sunny."},
    {"role": "user", "content": [{"type": "text", "text": LONG}]},
]


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ({"tools": [SEARCH, {"name": "f", "input_schema": NONSENSE}]},
         "tools[1].input_schema.properties.a.type"),
        ({"output_config": {"format": {"type": "json_schema", "schema": NONSENSE}}},
         "output_config.format.schema.properties.a.type"),
        ({"system": LONG}, "'system'"),
        ({"system": "s", "messages": LONG_TURN},
         "'messages[2].content'"),
        ({"temperature": 5}, "'temperature'"),
    ],
)  # fmt: skip
def test_a_400_of_the_chat_a_message_becomes_names_what_was_sent(
    tiny: Faces, asked: dict[str, Any], said: str
) -> None:
    """The chat's checks name `response_format.json_schema.schema`, `tools[i].function.parameters` and
    `messages[k]` (the system prompt the first of them); a Messages request sent `output_config.format`,
    its own tools' `input_schema` (Anthropic's server tools among them), `system` and its `messages[i]`."""
    body = {"model": "reverse", "max_tokens": 4, "messages": ASK, **asked}
    refused = httpx.post(f"{tiny.url}/v1/messages", json=body, headers={"x-api-key": KEY})
    assert refused.status_code == 400
    assert said in refused.json()["error"]["message"]


def test_a_server_tool_of_anthropic_s_is_left_out_and_one_forced_is_a_400(tiny: Faces) -> None:
    asked = {"model": "tools", "max_tokens": 40, "messages": ASK, "tools": [SEARCH, WEATHER]}
    listed = httpx.post(f"{tiny.url}/v1/messages", json=asked, headers={"x-api-key": KEY})
    assert listed.status_code == 200
    assert [block["name"] for block in listed.json()["content"]] == ["get_weather"]  # the first offered
    forced = httpx.post(
        f"{tiny.url}/v1/messages",
        json={**asked, "tool_choice": {"type": "tool", "name": "web_search"}},
        headers={"x-api-key": KEY},
    )
    assert forced.status_code == 400
    assert "run on Anthropic's machines" in forced.json()["error"]["message"]


def test_documents_reach_the_model_as_their_text(tiny: Faces) -> None:
    pdf = base64.b64encode(documents.pdf("Invoice 4471 is due in March.")).decode()
    blocks = [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": pdf}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Plain notes."}},
        {"type": "text", "text": "Summarise."},
    ]
    recalled = sdk(tiny).messages.create(
        model="recall",
        max_tokens=200,
        messages=[{"role": "user", "content": blocks}],  # type: ignore[list-item]
    )
    text = "".join(block.text for block in recalled.content if isinstance(block, types.TextBlock))
    assert "Invoice 4471 is due in March." in text
    assert "Plain notes." in text


def test_search_results_reach_the_model_as_their_text_and_hosted_tools_blocks_are_named(tiny: Faces) -> None:
    """A client's retrieval hands search results over as blocks of their own, in a turn or a tool's result;
    the blocks of Anthropic's server tools (run on its side, none here) are a 400 that names them, where
    either was pydantic's "Input should be a valid string"."""
    found = {
        "type": "search_result",
        "source": "https://wiki.example/vault",
        "title": "Vault",
        "content": [{"type": "text", "text": "The vault code is 4471."}],
    }
    called = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "vault"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [found]}
    for said in (
        [{"role": "user", "content": [found, {"type": "text", "text": "The code?"}]}],
        [ASK[0], {"role": "assistant", "content": [called]}, {"role": "user", "content": [result]}],
    ):
        recalled = sdk(tiny).messages.create(model="recall", max_tokens=200, messages=said)  # type: ignore[arg-type]
        text = "".join(block.text for block in recalled.content if isinstance(block, types.TextBlock))
        assert "Vault (https://wiki.example/vault):" in text
        assert "The vault code is 4471." in text
        assert "search_result" not in text
    hosted = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}}
    asked = [*ASK, {"role": "assistant", "content": [hosted]}]
    body = {"model": "recall", "max_tokens": 8, "messages": asked}
    refused = httpx.post(f"{tiny.url}/v1/messages", json=body, headers={"x-api-key": KEY})
    assert refused.status_code == 400
    assert "`server_tool_use` block" in refused.json()["error"]["message"]


def test_the_models_list_is_anthropic_s_when_asked_by_its_sdk(tiny: Faces) -> None:
    client = sdk(tiny)
    listed = client.models.list()
    assert [m.id for m in listed.data] == ["ponder", "reverse", "recall", "tools", "vllm"]
    assert all(m.type == "model" for m in listed.data)
    assert client.models.retrieve("reverse").display_name == "reverse"
    # Without `anthropic-version`, OpenAI's list.
    assert tiny.http.models.list().data[0].object == "model"


def ended(client: anthropic.Anthropic, batch_id: str) -> Any:
    """The message batch once it has ended (its tiny models answer at once)."""
    deadline = time.monotonic() + 60
    while (batch := client.messages.batches.retrieve(batch_id)).processing_status != "ended":
        assert time.monotonic() < deadline, batch
        time.sleep(0.1)
    return batch


def test_a_message_batch_runs_each_request_as_a_message_and_gives_anthropic_s_results(tiny: Faces) -> None:
    client = sdk(tiny)
    one: dict[str, Any] = {"model": "reverse", "max_tokens": 50, "messages": ASK}
    asked = [
        {"custom_id": "reversed", "params": one},
        {"custom_id": "recalled", "params": {**one, "model": "recall", "system": "Be brief."}},
        # `reverse` cannot hold its answer to a format: refused as it runs
        {"custom_id": "refused", "params": {**one, "output_config": BRIEF}},
    ]
    made = client.messages.batches.create(requests=asked)  # type: ignore[arg-type]
    assert made.id.startswith("msgbatch_")
    assert made.processing_status == "in_progress"
    assert made.request_counts.processing == 3
    batch = ended(client, made.id)
    assert batch.request_counts.model_dump() == {
        "processing": 0, "succeeded": 2, "errored": 1, "canceled": 0, "expired": 0
    }  # fmt: skip
    assert batch.results_url == f"{tiny.url}/v1/messages/batches/{made.id}/results"
    results = {result.custom_id: result.result for result in client.messages.batches.results(made.id)}
    reversed_, recalled, failed = results["reversed"], results["recalled"], results["refused"]
    assert reversed_.type == "succeeded"
    assert [block.text for block in reversed_.message.content] == ["Paris? in weather the is What"]  # type: ignore[union-attr]
    assert recalled.type == "succeeded"
    assert "system: Be brief." in recalled.message.content[0].text  # type: ignore[union-attr]
    assert failed.type == "errored"
    assert failed.error.error.type == "invalid_request_error"
    # One of the caller's batches: on Anthropic's list, and on the OpenAI face's.
    assert made.id in [listed.id for listed in client.messages.batches.list()]
    assert "batch_" + made.id.removeprefix("msgbatch_") in [listed.id for listed in tiny.http.batches.list()]


def test_a_message_batch_cancelled_at_once_ends_with_what_it_did_not_run_canceled(tiny: Faces) -> None:
    client = sdk(tiny)
    asked = [
        {"custom_id": f"r{i}", "params": {"model": "reverse", "max_tokens": 5, "messages": ASK}}
        for i in range(40)
    ]
    made = client.messages.batches.create(requests=asked)  # type: ignore[arg-type]
    assert client.messages.batches.cancel(made.id).processing_status in ("canceling", "ended")
    batch = ended(client, made.id)
    counts = batch.request_counts
    assert counts.succeeded + counts.canceled == 40
    assert batch.cancel_initiated_at is not None
    results = list(client.messages.batches.results(made.id))
    assert sorted(result.custom_id for result in results) == sorted(f"r{i}" for i in range(40))
    assert sum(result.result.type == "canceled" for result in results) == counts.canceled


def test_a_message_batch_that_cannot_run_is_a_400_naming_the_request(tiny: Faces) -> None:
    one = {"model": "reverse", "max_tokens": 5, "messages": ASK}
    for requests, param in [
        ([{"custom_id": "a", "params": one}, {"custom_id": "a", "params": one}], "requests[1].custom_id"),
        ([{"custom_id": "a", "params": {**one, "model": "nowhere"}}], "requests[0].params.model"),
        ([{"custom_id": "a", "params": {**one, "stream": True}}], "requests[0].params.stream"),
        ([{"custom_id": "a b", "params": one}], "requests[0].custom_id"),
    ]:
        refused = httpx.post(
            f"{tiny.url}/v1/messages/batches", json={"requests": requests}, headers={"x-api-key": KEY}
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["type"] == "error"
        assert param in refused.json()["error"]["message"]
    with pytest.raises(anthropic.NotFoundError):
        sdk(tiny).messages.batches.retrieve("msgbatch_nowhere")
