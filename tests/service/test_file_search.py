"""`file_search` in the Responses API, run by the server over the caller's vector stores with the default
chat model (greedy, so the query it writes is the same each run): its call is an item of the output, with
its results when asked, the answer cites the file it drew on, and the stream says each step."""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest

ROCKETS = b"A rocket engine burns liquid oxygen and kerosene to make thrust for the launch vehicle."
CATS = b"Cats are small domesticated mammals. A cat purrs, sleeps most of the day and hunts mice."
MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def store(server: Any) -> str:
    client = server.http
    ids = [
        client.files.create(file=(name, content), purpose="assistants").id
        for name, content in (("rockets.md", ROCKETS), ("cats.txt", CATS))
    ]
    made = client.vector_stores.create(name="facts", file_ids=ids)
    deadline = time.monotonic() + 60
    while client.vector_stores.retrieve(made.id).status != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return str(made.id)


def ask(client: Any, store: str, **extra: Any) -> Any:
    return client.responses.create(
        model=MODEL,
        input="What does a rocket engine burn?",
        tools=[{"type": "file_search", "vector_store_ids": [store], **extra.pop("tool", {})}],
        tool_choice={"type": "file_search"},
        temperature=0,
        max_output_tokens=extra.pop("max_output_tokens", 64),
        **extra,
    )


@pytest.mark.one_face
def test_the_server_searches_and_the_answer_cites_the_file(client: Any, store: str) -> None:
    answer = ask(client, store, include=["file_search_call.results"])
    call, message = answer.output[0], answer.output[-1]
    assert call.type == "file_search_call"
    assert call.status == "completed"
    assert call.queries
    assert call.results[0].filename == "rockets.md"
    assert "kerosene" in call.results[0].text
    assert {result.vector_store_id for result in call.results} == {store}  # each result names its store
    assert message.type == "message"
    cited = [a.filename for a in message.content[0].annotations if a.type == "file_citation"]
    assert cited == ["rockets.md"]
    assert answer.usage.input_tokens > 0  # both rounds counted
    assert answer.usage.output_tokens <= 64  # max_output_tokens bounds the rounds together
    assert answer.tools[0].type == "file_search"
    assert answer.tools[0].max_num_results == 5  # echoed with the defaults it ran with
    assert answer.tools[0].ranking_options.ranker == "auto"
    assert answer.tools[0].ranking_options.score_threshold == 0
    assert answer.tools[0].to_dict(exclude_unset=True)["filters"] is None  # present: the schema requires it


def test_a_search_cut_by_the_budget_while_the_model_writes_it_is_kept_incomplete(
    client: Any, store: str
) -> None:
    # 18 tokens end the turn inside the call's arguments: the call is kept, never run, never an empty output.
    for streamed in (False, True):
        answer = ask(client, store, max_output_tokens=18, stream=streamed)
        if streamed:
            events = list(answer)
            assert events[-1].type == "response.incomplete"
            answer = events[-1].response
        assert answer.status == "incomplete"
        assert answer.incomplete_details.reason == "max_output_tokens"
        assert [(item.type, item.status) for item in answer.output] == [("file_search_call", "incomplete")]
        assert answer.output[0].results is None
        assert answer.usage.output_tokens <= 18


@pytest.mark.one_face
def test_results_are_left_out_unless_asked_and_filters_apply(client: Any, store: str) -> None:
    plain = ask(client, store)
    assert plain.output[0].results is None
    only_cats = ask(
        client,
        store,
        include=["file_search_call.results"],
        tool={"filters": {"type": "eq", "key": "missing", "value": "x"}, "max_num_results": 2},
    )
    assert only_cats.output[0].results == []


def test_the_stream_says_each_step_of_the_search(http_client: openai.OpenAI, store: str) -> None:
    kinds = [event.type for event in ask(http_client, store, stream=True)]
    searching = [
        "response.output_item.added",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.output_item.done",
    ]
    assert kinds[2:7] == searching
    assert "response.output_text.annotation.added" in kinds
    assert kinds[-1] in ("response.completed", "response.incomplete")  # the answer may use up its budget


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"vector_store_ids": ["vs_missing"]}, "tools[0].vector_store_ids"),
        ({"vector_store_ids": []}, "tools[0].vector_store_ids"),
        ({"filters": {"type": "between", "key": "a", "value": 1}}, "tools[0].filters.type"),
        ({"max_num_results": 0}, "tools[0].max_num_results"),
        # Each once a 500 and a dropped connection.
        ({"ranking_options": "fast"}, "tools[0].ranking_options"),
        ({"ranking_options": {"hybrid_search": 3}}, "tools[0].ranking_options.hybrid_search"),
        ({"ranking_options": {"ranker": ["auto"]}}, "tools[0].ranking_options.ranker"),
        ({"ranking_options": {"score_threshold": "high"}}, "tools[0].ranking_options.score_threshold"),
    ],
)
def test_a_bad_file_search_tool_is_a_4xx_naming_it(
    client: Any, store: str, tool: dict[str, Any], param: str
) -> None:
    with pytest.raises((openai.BadRequestError, openai.NotFoundError)) as caught:
        client.responses.create(
            model=MODEL, input="hi", tools=[{"type": "file_search", "vector_store_ids": [store], **tool}]
        )
    assert caught.value.body["param"] == param


@pytest.mark.one_face
def test_allowed_tools_can_allow_the_search_beside_a_function_it_leaves_out(client: Any, store: str) -> None:
    weather = {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
    answer = client.responses.create(
        model=MODEL,
        input="What does a rocket engine burn?",
        tools=[weather, {"type": "file_search", "vector_store_ids": [store]}],
        tool_choice={"type": "allowed_tools", "mode": "required", "tools": [{"type": "file_search"}]},
        temperature=0,
        max_output_tokens=64,
    )
    kinds = [item.type for item in answer.output]
    assert kinds[0] == "file_search_call"  # `required` over what it allows: the search, run by the server
    assert "function_call" not in kinds
