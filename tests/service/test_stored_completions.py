"""Stored chat completions through the openai SDK, over HTTP and in-process: `store: true` with metadata,
retrieve, messages, update, delete, a list of 250 walked by the SDK's auto-pagination with filters, a
stream readable the moment it ends, one cut by its client, and storing switched off or unreachable."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import modelport
from tests.support.configs import NO_EOS, tiny_settings
from tests.support.faces import Faces, faces


def ask(client: Any, text: str, **extra: Any) -> Any:
    return client.chat.completions.create(
        model="reverse", messages=[{"role": "user", "content": text}], **extra
    )


def test_a_stored_completion_comes_back_with_its_metadata_and_messages(tiny: Any) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "one two three"}]
    made = tiny.chat.completions.create(
        model="reverse", messages=messages, store=True, metadata={"user": "ann"}
    )
    got = tiny.chat.completions.retrieve(made.id)
    assert got.id == made.id
    assert got.choices[0].message.content == "three two one"
    assert got.metadata == {"user": "ann"}
    assert got.model_extra["input_messages"] == messages
    listed = list(tiny.chat.completions.messages.list(made.id))
    assert [(m.id, m.role, m.content) for m in listed] == [
        (f"{made.id}-0", "system", "Be brief."),
        (f"{made.id}-1", "user", "one two three"),
    ]
    newest = tiny.chat.completions.messages.list(made.id, order="desc", limit=1)
    assert [m.id for m in newest.data] == [f"{made.id}-1"]
    assert [m.id for m in newest] == [f"{made.id}-1", f"{made.id}-0"]  # iterating walks every page
    assert tiny.chat.completions.update(made.id, metadata={"user": "bob"}).metadata == {"user": "bob"}
    assert tiny.chat.completions.delete(made.id).deleted
    with pytest.raises(openai.NotFoundError):
        tiny.chat.completions.retrieve(made.id)


def test_only_what_asks_to_be_stored_is_stored(tiny: Any) -> None:
    unstored = ask(tiny, "not kept")
    with pytest.raises(openai.NotFoundError):
        tiny.chat.completions.retrieve(unstored.id)


@pytest.mark.slow
def test_two_hundred_and_fifty_rows_page_by_the_sdk_with_filters(tiny: Any) -> None:
    tag = f"run-{time.monotonic_ns()}"
    made = [
        ask(tiny, f"word {i}", store=True, metadata={"run": tag, "parity": str(i % 2)}).id for i in range(250)
    ]
    walked = [c.id for c in tiny.chat.completions.list(metadata={"run": tag}, limit=20)]
    assert walked == made  # oldest first, every row once, though many share a second
    first = tiny.chat.completions.list(metadata={"run": tag}, limit=20, order="desc")
    assert first.has_more
    assert [c.id for c in first.data] == made[::-1][:20]
    odd = [c.id for c in tiny.chat.completions.list(metadata={"run": tag, "parity": "1"}, limit=100)]
    assert odd == made[1::2]
    assert [c.id for c in tiny.chat.completions.list(model="recall", metadata={"run": tag})] == []


def test_a_streamed_answer_is_stored_before_its_last_event(tiny: Any) -> None:
    stream = tiny.chat.completions.create(
        model="reverse", messages=[{"role": "user", "content": "a b c"}], stream=True, store=True
    )
    chunk_id = [chunk.id for chunk in stream][-1]
    got = tiny.chat.completions.retrieve(chunk_id)  # at once: no waiting, no polling
    assert got.choices[0].message.content == "c b a"


def test_bad_metadata_is_a_400_naming_it(tiny: Any) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(tiny, "x", store=True, metadata={f"k{i}": "v" for i in range(17)})
    assert caught.value.body["param"] == "metadata"
    with pytest.raises(openai.BadRequestError):
        ask(tiny, "x", store=True, metadata={"k" * 65: "v"})
    with pytest.raises(openai.BadRequestError):
        ask(tiny, "x", store=True, metadata={"k": "v" * 513})
    with pytest.raises(openai.BadRequestError) as caught:
        tiny.chat.completions.list(limit=0)
    assert caught.value.body["param"] == "limit"


def test_a_list_limit_over_the_bound_is_capped_not_refused(tiny: Any) -> None:
    for i in range(3):
        ask(tiny, f"kept {i}", store=True)
    capped = tiny.chat.completions.list(limit=1000)  # clients ask for more than 100 and expect a page
    assert 3 <= len(capped.data) <= 100
    assert tiny.files.list(limit=20_000).object == "list"  # up to 10 000 files a page, as OpenAI


def test_a_stream_its_client_leaves_is_stored_as_what_was_produced(server: Faces) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)
    tag = f"left-{time.monotonic_ns()}"
    stream = client.chat.completions.create(
        model="smollm2-135m-instruct",
        messages=[{"role": "user", "content": "Tell me a long story."}],
        max_tokens=2000,
        logit_bias=NO_EOS,
        stream=True,
        store=True,
        metadata={"run": tag},
    )
    for i, _ in enumerate(stream):
        if i == 5:
            break
    stream.close()
    deadline = time.monotonic() + 10
    while not (found := list(client.chat.completions.list(metadata={"run": tag}))):
        assert time.monotonic() < deadline, "the cut stream was not stored"
        time.sleep(0.1)
    assert found[0].model_extra["status"] == "incomplete"
    assert 0 < len(found[0].choices[0].message.content or "") < 2000


def test_with_storing_off_asking_to_store_is_a_400(tmp_path: Path) -> None:
    with modelport.OpenAI(settings=tiny_settings("none")) as client:
        assert ask(client, "fine").choices[0].message.content == "fine"
        with pytest.raises(openai.BadRequestError) as caught:
            ask(client, "x", store=True)
        assert caught.value.body["param"] == "store"
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.list()


def test_an_unreachable_database_is_a_503_and_shows_in_health(tmp_path: Path) -> None:
    with faces(tiny_settings("postgresql://postgres@127.0.0.1:9/none")) as live:
        client = live.http
        assert ask(client, "still answers").choices[0].message.content == "answers still"
        with pytest.raises(openai.InternalServerError) as caught:
            ask(client, "x", store=True)
        assert caught.value.status_code == 503
        assert caught.value.body["code"] == "store_unavailable"
        health = httpx.get(f"{live.url}/health").json()
        assert health["store"]["state"] == "down"
