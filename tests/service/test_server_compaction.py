"""Compaction a turn does itself, on both faces: server-side compaction (`context_management`), where a turn
whose rendered input reaches its `compact_threshold` (or, without one, does not fit the model) first
compacts its context into a compaction item, the first of its output, and answers from it; and a turn whose
input ends in a `compaction_trigger` (Codex's remote compaction), whose one output is that item. A stored
conversation goes on from its latest compaction item. `recall` answers with the conversation it was given
(a word a token), so what reached the model, and what the summariser was shown, is read from its answers;
`narrow` is `recall` with a context of 60 words; `recall-tools` and `narrow-tools` first call the tool they
are given (an MCP server's, run by the server), then recall."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.support.configs import tiny_models
from tests.support.faces import Faces, faces
from tests.support.live import serve_app

KEY = "sk-compaction"
SUMMARY = "assistant: Summary of the conversation so far:"
TRIGGER = {"type": "compaction_trigger"}


# What the MCP server's one tool answers: more than `narrow` reads beside a message, in few characters (the
# summary of it may take an eighth of them, in words).
PAGE = " ".join(["x"] * 64)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    database = str(tmp_path_factory.mktemp("compaction") / "state.db")
    models = {
        "recall": "recall_chat",
        "narrow": "narrow_recall_chat",
        "recall-tools": "recall_tool_chat",
        "narrow-tools": "narrow_recall_tool_chat",
    }
    settings = tiny_models(database, KEY, **models).model_copy(update={"allow_fetch": ["127.0.0.1"]})
    with faces(settings, api_key=KEY) as both:
        yield both


@pytest.fixture(scope="module")
def pages() -> Iterator[dict[str, Any]]:
    """An MCP server (the `mcp` package's, on 127.0.0.1) whose one tool answers PAGE: its `mcp` tool."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("pages")

    @server.tool()
    def page(text: str) -> str:
        """A page of text about `text`."""
        return PAGE

    with serve_app(server.streamable_http_app()) as url:
        mcp = {"type": "mcp", "server_label": "pages", "require_approval": "never"}
        yield {**mcp, "server_url": f"{url}/mcp"}


@pytest.fixture(params=["http", "in-process"])
def face(request: pytest.FixtureRequest, served: Faces) -> openai.OpenAI:
    return served.face(request.param)


def compaction(threshold: int | None = None) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {"type": "compaction"}
    if threshold is not None:
        entry["compact_threshold"] = threshold
    return [entry]


def given_back(output: list[Any]) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True, warnings=False) for item in output]


def test_a_turn_past_its_threshold_answers_from_a_summary_of_its_context(face: openai.OpenAI) -> None:
    one = face.responses.create(model="recall", input="my colour is teal")
    two = face.responses.create(
        model="recall",
        input="what is my colour",
        previous_response_id=one.id,
        context_management=compaction(5),
    )
    assert [item.type for item in two.output] == ["compaction", "message"]
    summary = two.output[0].encrypted_content
    # The summariser was shown the earlier turn and this one's input (the recall model echoes its prompt).
    assert "my colour is teal" in summary
    assert "what is my colour" in summary
    # The answer read the summary and the turn's own message, not the earlier turn.
    assert two.output_text == f"{SUMMARY}\n{summary} / user: what is my colour"
    # The summary's tokens are the response's too.
    assert two.usage.output_tokens == len(summary.split(" ")) + len(two.output_text.split(" "))
    assert face.responses.retrieve(two.id).output[0].encrypted_content == summary

    # The conversation goes on from the compaction item, as a client that drops what came before it sends
    # (the summary and the answer after it are one assistant turn to the model).
    three = face.responses.create(model="recall", input="and now", previous_response_id=two.id)
    assert [item.type for item in three.output] == ["message"]
    assert three.output_text == f"{SUMMARY}\n{summary}\n\n{two.output_text} / user: and now"
    pruned = face.responses.create(
        model="recall", input=[*given_back(two.output), {"role": "user", "content": "and now"}]
    )
    assert pruned.output_text == three.output_text


def test_a_turn_below_its_threshold_is_left_whole(face: openai.OpenAI) -> None:
    # A first turn of the user's own words has nothing a summary would replace, whatever its length.
    one = face.responses.create(model="recall", input="my colour is teal", context_management=compaction(1))
    assert [item.type for item in one.output] == ["message"]
    # 1,000: counted by the model (the request's size says it may reach it); a million: too short to count.
    for threshold in (1000, 1_000_000):
        two = face.responses.create(
            model="recall",
            input="what is my colour",
            previous_response_id=one.id,
            context_management=compaction(threshold),
        )
        assert [item.type for item in two.output] == ["message"]
        said = f"user: my colour is teal / assistant: {one.output_text} / user: what is my colour"
        assert two.output_text == said
        assert two.usage.input_tokens == len(said.split(" "))


def test_the_stream_tells_the_compaction_before_the_answer(face: openai.OpenAI) -> None:
    one = face.responses.create(model="recall", input="my colour is teal")
    events = list(
        face.responses.create(
            model="recall",
            input="what is my colour",
            previous_response_id=one.id,
            context_management=compaction(5),
            stream=True,
        )
    )
    kinds = [event.type for event in events]
    assert kinds[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.compaction.compacting",
        "response.output_item.done",
    ]
    assert kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    added, compacting, done = events[2:5]
    assert added.item.type == "compaction"
    assert added.item.encrypted_content == ""
    assert (compacting.item_id, compacting.output_index) == (added.item.id, 0)
    assert done.item.id == added.item.id
    final = events[-1].response
    assert [item.type for item in final.output] == ["compaction", "message"]
    assert done.item.encrypted_content == final.output[0].encrypted_content != ""
    message_added = next(e for e in events if e.type == "response.output_item.added" and e.output_index == 1)
    assert message_added.item.type == "message"
    assert final.output_text.startswith(SUMMARY)


def test_without_a_threshold_a_turn_compacts_once_its_context_does_not_fit(face: openai.OpenAI) -> None:
    one = face.responses.create(model="narrow", input="my colour is teal, a shade of blue")
    two = face.responses.create(
        model="narrow",
        input="and my car is red",
        previous_response_id=one.id,
        context_management=compaction(),
    )
    assert [item.type for item in two.output] == ["message"]  # it fits: left whole
    # The third turn does not fit the model's 60 words: refused without compaction, compacted with it.
    with pytest.raises(openai.BadRequestError) as refused:
        face.responses.create(model="narrow", input="so what now", previous_response_id=two.id)
    assert refused.value.code == "context_length_exceeded"
    three = face.responses.create(
        model="narrow", input="so what now", previous_response_id=two.id, context_management=compaction()
    )
    assert [item.type for item in three.output] == ["compaction", "message"]
    assert three.output_text.startswith(SUMMARY)
    assert three.output_text.endswith(" / user: so what now")
    # The transcript did not fit the summariser either: it read it from its later lines.
    summary = three.output[0].encrypted_content
    assert "User: and my car is red" in summary
    assert "User: my colour is teal" not in summary


def test_a_compaction_trigger_makes_the_turn_one_compaction_item(face: openai.OpenAI) -> None:
    one = face.responses.create(model="recall", input="my colour is teal")
    asked: dict[str, Any] = {
        "model": "recall",
        "previous_response_id": one.id,
        "input": [{"role": "user", "content": "and yours"}, TRIGGER],
    }
    made = face.responses.create(**asked)
    assert made.status == "completed"
    assert [item.type for item in made.output] == ["compaction"]
    summary = made.output[0].encrypted_content
    assert "my colour is teal" in summary
    assert "and yours" in summary
    after = face.responses.create(model="recall", input="what now", previous_response_id=made.id)
    assert after.output_text == f"{SUMMARY}\n{summary} / user: what now"
    # Streamed, as Codex reads it: exactly one output item, the compaction, then `response.completed`.
    events = list(face.responses.create(**asked, stream=True, store=False))
    assert [event.type for event in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.compaction.compacting",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[4].item.type == "compaction"
    assert events[4].item.encrypted_content


def test_a_compaction_trigger_is_only_a_turns_final_input_item(face: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as early:
        face.responses.create(model="recall", input=[TRIGGER, {"role": "user", "content": "hi"}])
    assert early.value.body["param"] == "input[0].type"
    assert "final input item" in early.value.message
    conversation = face.conversations.create()
    with pytest.raises(openai.BadRequestError) as kept:
        face.conversations.items.create(conversation.id, items=[TRIGGER])
    assert kept.value.body["param"] == "items[0].type"
    with pytest.raises(openai.BadRequestError) as unknown:
        face.responses.create(model="recall", input="hi", context_management=[{"type": "trim"}])
    assert unknown.value.body["param"] == "context_management[0].type"


def test_a_conversation_goes_on_from_its_latest_compaction(face: openai.OpenAI) -> None:
    conversation = face.conversations.create()
    face.responses.create(model="recall", input="my colour is teal", conversation=conversation.id)
    two = face.responses.create(
        model="recall",
        input="what is my colour",
        conversation=conversation.id,
        context_management=compaction(5),
    )
    summary = two.output[0].encrypted_content
    three = face.responses.create(model="recall", input="and now", conversation=conversation.id)
    assert three.output_text == f"{SUMMARY}\n{summary}\n\n{two.output_text} / user: and now"
    # A trigger asks a turn for its compaction: the conversation keeps the item, not the asking.
    face.responses.create(model="recall", input=[TRIGGER], conversation=conversation.id)
    kept = face.conversations.items.list(conversation.id, order="asc").data
    assert [item.type for item in kept][-2:] == ["message", "compaction"]


def test_the_agents_sdk_carries_its_conversation_through_a_compaction(served: Faces) -> None:
    """The OpenAI Agents SDK with `ModelSettings.context_management`: its run reads the compaction item as
    one, and the next run, given the earlier's items as the SDK keeps them, reaches the model from it."""
    import asyncio

    from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)  # traces would go to OpenAI's servers

    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=f"{served.url}/v1", api_key=KEY, max_retries=0)
        model = OpenAIResponsesModel(model="recall", openai_client=client)
        agent = Agent(name="a", model=model, model_settings=ModelSettings(context_management=compaction(5)))
        first = await Runner.run(agent, "my colour is teal")  # nothing before it to compact
        assert [type(item).__name__ for item in first.new_items] == ["MessageOutputItem"]
        second = await Runner.run(agent, [*first.to_input_list(), {"role": "user", "content": "and now"}])
        assert [type(item).__name__ for item in second.new_items] == ["CompactionItem", "MessageOutputItem"]
        summary = second.new_items[0].raw_item["encrypted_content"]
        assert "my colour is teal" in summary
        assert second.final_output == f"{SUMMARY}\n{summary} / user: and now"
        # Given back as the SDK keeps the run, below the threshold: the model reads the item as the summary.
        later = agent.clone(model_settings=ModelSettings(context_management=compaction(1_000_000)))
        third = await Runner.run(later, [*second.to_input_list(), {"role": "user", "content": "what now"}])
        assert [type(item).__name__ for item in third.new_items] == ["MessageOutputItem"]
        assert f"{SUMMARY}\n{summary}" in third.final_output
        assert third.final_output.endswith(" / user: what now")
        await client.close()

    asyncio.run(run())


def test_a_tool_output_the_summariser_cannot_read_whole_is_read_from_its_end(face: openai.OpenAI) -> None:
    # A call and its output of 80 words, on a model that reads 60: the turn does not fit, and neither does
    # the output alone in the summariser's prompt, so it is cut from its start until it does.
    output = " ".join(f"w{i}" for i in range(80))
    given: list[Any] = [
        {"role": "user", "content": "list it"},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": output},
    ]
    made = face.responses.create(model="narrow", input=given, context_management=compaction())
    assert [item.type for item in made.output] == ["compaction", "message"]
    summary = made.output[0].encrypted_content
    assert "Tool result:" not in summary  # the line's start went
    assert " w10 " not in summary
    assert "w79" in summary  # its end was read


def test_a_tool_s_result_that_takes_the_turn_past_its_threshold_is_compacted_before_the_next_round(
    face: openai.OpenAI, pages: dict[str, Any]
) -> None:
    """A first turn of the user's own words does not compact before it answers, but once a tool the server
    runs has answered and the turn's context has reached its threshold, it does, before the next round."""
    made = face.responses.create(
        model="recall-tools", input="fetch the page", tools=[pages], max_tool_calls=1,
        context_management=compaction(40),
    )  # fmt: skip
    assert [item.type for item in made.output] == ["mcp_list_tools", "mcp_call", "compaction", "message"]
    assert made.output[1].output == PAGE
    summary = made.output[2].encrypted_content
    # The summariser was shown the turn, the call and its result; the answer read the summary and the
    # user's message, not the result itself.
    assert "fetch the page" in summary
    assert "Tool result: x x" in summary
    assert made.output_text == f"{SUMMARY}\n{summary} / user: fetch the page"
    # The chain goes on from the compaction item.
    after = face.responses.create(model="recall", input="and now", previous_response_id=made.id)
    assert after.output_text == f"{SUMMARY}\n{summary}\n\n{made.output_text} / user: and now"

    # Below its threshold, the same turn is left whole.
    whole = face.responses.create(
        model="recall-tools", input="fetch the page", tools=[pages], max_tool_calls=1,
        context_management=compaction(1000),
    )  # fmt: skip
    assert [item.type for item in whole.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert PAGE in whole.output_text


def test_without_a_threshold_a_tool_s_result_that_does_not_fit_is_compacted_and_the_stream_says_so(
    face: openai.OpenAI, pages: dict[str, Any]
) -> None:
    events = list(
        face.responses.create(
            model="narrow-tools", input="fetch the page", tools=[pages], max_tool_calls=1,
            context_management=compaction(), stream=True,
        )
    )  # fmt: skip
    done = events[-1].response
    assert [item.type for item in done.output] == ["mcp_list_tools", "mcp_call", "compaction", "message"]
    compacting = next(e for e in events if e.type == "response.compaction.compacting")
    assert compacting.output_index == 2
    assert [e.item.type for e in events if e.type == "response.output_item.done"] == [
        "mcp_list_tools", "mcp_call", "compaction", "message",
    ]  # fmt: skip
    assert done.output_text.endswith(" / user: fetch the page")
    assert PAGE not in done.output_text

    # Without `context_management` the turn fails as the model refused it.
    failed = face.responses.create(
        model="narrow-tools", input="fetch the page", tools=[pages], max_tool_calls=1
    )
    assert failed.status == "failed"
    assert failed.error is not None
