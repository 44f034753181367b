"""The Conversations API over both faces, and `conversation` on responses: a turn reads every item of its
conversation and adds its input and output to it. `recall` answers with the conversation it was given, so
what reached the model is what it says."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest

from tests.support.configs import tiny_settings
from tests.support.faces import Faces, faces
from tests.support.live import health_probed
from tests.support.machine_load import slack


def say(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def test_a_conversation_and_its_items_are_created_read_changed_and_deleted(tiny: Any) -> None:
    made = tiny.conversations.create(items=[say("first"), say("second")], metadata={"topic": "tests"})
    assert made.object == "conversation"
    assert tiny.conversations.retrieve(made.id).metadata == {"topic": "tests"}
    assert tiny.conversations.update(made.id, metadata={"topic": "changed"}).metadata == {"topic": "changed"}
    newest_first = tiny.conversations.items.list(made.id)
    texts = [item.content[0].text for item in newest_first.data]
    assert texts == ["second", "first"]
    added = tiny.conversations.items.create(made.id, items=[say("third")])
    assert [item.content[0].text for item in added.data] == ["third"]
    oldest_first = tiny.conversations.items.list(made.id, order="asc", limit=2)
    assert [item.content[0].text for item in oldest_first.data] == ["first", "second"]
    assert oldest_first.has_more
    rest = tiny.conversations.items.list(made.id, order="asc", after=oldest_first.data[-1].id)
    assert [item.content[0].text for item in rest.data] == ["third"]
    third = tiny.conversations.items.retrieve(added.data[0].id, conversation_id=made.id)
    assert third.content[0].text == "third"
    assert third.status == "completed"
    tiny.conversations.items.delete(added.data[0].id, conversation_id=made.id)
    with pytest.raises(openai.NotFoundError):
        tiny.conversations.items.retrieve(added.data[0].id, conversation_id=made.id)
    assert tiny.conversations.delete(made.id).deleted
    with pytest.raises(openai.NotFoundError):
        tiny.conversations.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        tiny.conversations.items.list(made.id)


def test_three_turns_through_a_conversation_reach_the_model_whole(tiny: Any) -> None:
    conversation = tiny.conversations.create(items=[say("My name is Ada.")])
    first = tiny.responses.create(model="recall", input="I live in Paris.", conversation=conversation.id)
    assert first.conversation.id == conversation.id
    tiny.responses.create(model="recall", input="I like tea.", conversation={"id": conversation.id})
    streamed = tiny.responses.create(
        model="recall", input="What do you know?", conversation=conversation.id, stream=True
    )
    final = next(e for e in streamed if e.type == "response.completed").response
    said = final.output_text
    for earlier in ("My name is Ada.", "I live in Paris.", "I like tea.", "What do you know?"):
        assert earlier in said
    assert "assistant:" in said  # the earlier answers are in it too
    listed = tiny.conversations.items.list(conversation.id, order="asc", limit=100).data
    assert [item.role for item in listed] == [
        "user",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def test_a_conversation_with_previous_response_id_is_a_400(tiny: Any) -> None:
    conversation = tiny.conversations.create()
    earlier = tiny.responses.create(model="recall", input="hi")
    with pytest.raises(openai.BadRequestError) as refused:
        tiny.responses.create(
            model="recall", input="again", conversation=conversation.id, previous_response_id=earlier.id
        )
    assert refused.value.body["param"] == "conversation"


def test_bad_conversation_input_is_a_4xx_naming_it(tiny: Any) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        tiny.responses.create(model="recall", input="hi", conversation="conv_nope")
    assert missing.value.body["param"] == "conversation"
    with pytest.raises(openai.BadRequestError):
        tiny.conversations.create(items=[say(str(i)) for i in range(21)])
    with pytest.raises(openai.BadRequestError) as bad_item:
        tiny.conversations.create(items=[{"type": "message", "role": "robot", "content": "x"}])
    assert bad_item.value.body["param"] == "items[0].role"
    made = tiny.conversations.create()
    with pytest.raises(openai.BadRequestError):
        tiny.conversations.items.list(made.id, include=["nonsense"])
    # An item's own id is the store's to hold (one of 3,000 characters was a 500 on PostgreSQL), and a
    # string: on every way in, a 400 naming it.
    for given in ("m" * 129, 7):
        long_id = {"type": "message", "role": "user", "content": "x", "id": given}
        with pytest.raises(openai.BadRequestError) as bad_id:
            tiny.conversations.create(items=[long_id])
        assert bad_id.value.body["param"] == "items[0].id"
        with pytest.raises(openai.BadRequestError) as bad_id:
            tiny.responses.create(model="recall", input=[long_id], conversation=made.id)
        assert bad_id.value.body["param"] == "input[0].id"


def test_a_conversation_outlives_its_server_and_is_shared_by_replicas(tmp_path: Any, postgres: Any) -> None:
    for database in (str(tmp_path / "state.db"), postgres.database()):
        with faces(tiny_settings(database)) as first:
            made = first.http.conversations.create(items=[say("kept")])
            first.http.responses.create(model="recall", input="and this", conversation=made.id)
        with faces(tiny_settings(database)) as again, faces(tiny_settings(database)) as beside:
            for served in (again, beside):
                items = served.http.conversations.items.list(made.id, order="asc").data
                assert [item.role for item in items] == ["user", "user", "assistant"]


def test_an_item_id_given_twice_is_a_400_and_a_replayed_turn_adds_nothing_twice(tiny: Any) -> None:
    same = {"id": "msg_same", "type": "message", "role": "user", "content": "x"}
    with pytest.raises(openai.BadRequestError) as twice:
        tiny.conversations.create(items=[same, same])
    assert twice.value.body["code"] == "duplicate_item_id"
    made = tiny.conversations.create(items=[same])
    with pytest.raises(openai.BadRequestError):
        tiny.conversations.items.create(made.id, items=[same])
    # A turn that sends an item the conversation holds already (a client replaying its history) is
    # answered, and the conversation keeps one copy.
    answer = tiny.responses.create(
        model="recall", conversation=made.id, input=[same, {**same, "id": "msg_new"}]
    )
    assert answer.status == "completed"
    ids = [item.id for item in tiny.conversations.items.list(made.id, order="asc")]
    assert ids.count("msg_same") == 1
    assert "msg_new" in ids


def test_a_conversation_holds_at_most_its_cap_even_from_adds_sent_together(
    tmp_path: Any, postgres: Any
) -> None:
    # 20 items a request, but nothing bounded how many a conversation held, and every turn reads them all.
    for database in (str(tmp_path / "state.db"), postgres.database()):
        settings = tiny_settings(database)
        settings.limits.conversation_items = 30
        with faces(settings) as served:
            holds_its_cap(served)


def holds_its_cap(served: Faces) -> None:
    made = served.http.conversations.create(items=[say("first")])

    async def flood() -> list[httpx.Response]:  # 10× the cap, 3 items a request, all at once
        async with httpx.AsyncClient(base_url=f"{served.url}/v1", timeout=60) as http:
            adds = (
                http.post(
                    f"/conversations/{made.id}/items", json={"items": [say(f"{i}.{j}") for j in range(3)]}
                )
                for i in range(100)
            )
            return await asyncio.gather(*adds)

    with health_probed(served.url) as waits:
        answers = asyncio.run(flood())
    refused = [a.json()["error"] for a in answers if a.status_code != 200]
    assert [a.status_code for a in answers].count(200) == 9  # 1 + 9 × 3 = 28: a tenth would pass 30
    assert {(e["code"], e["param"]) for e in refused} == {("conversation_full", "items")}
    assert len(refused) == 91
    assert sorted(waits)[len(waits) // 2] < 0.1 * slack()  # the median: the adds hold nobody up
    for face in (served.http, served.inprocess):
        with pytest.raises(openai.BadRequestError) as full:
            face.conversations.items.create(made.id, items=[say("one"), say("two"), say("three")])
        assert full.value.body["code"] == "conversation_full"
    # A turn adds its input and its answer whatever their number (it has run); then no turn starts.
    served.http.responses.create(model="recall", input="and this", conversation=made.id)
    assert len(served.http.conversations.items.list(made.id, limit=100).data) == 30
    for face in (served.http, served.inprocess):
        with pytest.raises(openai.BadRequestError) as closed:
            face.responses.create(model="recall", input="one more", conversation=made.id)
        assert (closed.value.body["code"], closed.value.body["param"]) == (
            "conversation_full",
            "conversation",
        )
