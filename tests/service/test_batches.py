"""The Files and Batch APIs through the openai SDK, over HTTP and in-process: 200 chat lines and 500
embedding lines run and match what the same requests give live, failing lines land in the error file with
their custom_id, cancel keeps what was done, and bad inputs are 4xx naming the line."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import modelport
from modelport.settings import BatchSettings, FileSettings, ModelConfig, Settings, StoreSettings
from tests.support.configs import tiny_settings
from tests.support.faces import faces

CHAT_LINES = 64  # four times the lines a batch runs at once (`[batches] concurrency`, 16)
EMBEDDING_LINES = 500


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


ENDED = ("completed", "failed", "cancelled", "expired")


def wait(client: Any, batch_id: str, seconds: float = 600) -> Any:
    deadline = time.monotonic() + seconds
    while (batch := client.batches.retrieve(batch_id)).status not in ENDED:
        assert time.monotonic() < deadline, f"batch {batch_id} still {batch.status}"
        time.sleep(0.2)
    return batch


def lines_of(client: Any, file_id: str | None) -> dict[str, dict[str, Any]]:
    if file_id is None:
        return {}
    content = client.files.content(file_id).content
    return {item["custom_id"]: item for item in map(json.loads, content.splitlines())}


def chat_body(i: int) -> dict[str, Any]:
    return {
        "model": "smollm2-135m-instruct",
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": f"Name a colour. {i}"},
        ],
        "max_tokens": 6,
        "temperature": 0.8,
        "seed": 1000 + i,
    }


# A cache per slot: a seeded request then samples the same text however many others decode beside it (with
# the default shared cache, their number changes the attention's last bits, and so the samples).
# Every slot open to the batch: this test is about what the lines give, not about live traffic.
SEEDED = """
defaults = false
[[models]]
id = "smollm2-135m-instruct"
engine = "llamacpp"
n_ctx_per_slot = 2048
[batches]
share = 1.0
"""


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[openai.OpenAI]:
    database = str(tmp_path_factory.mktemp("batches") / "state.db")
    with faces(Settings.model_validate({**tomllib.loads(SEEDED), "store": {"url": database}})) as live:
        yield live.http


@pytest.fixture(scope="module")
def chat_lines() -> list[dict[str, Any]]:
    lines = [
        {"custom_id": f"chat-{i}", "method": "POST", "url": "/v1/chat/completions", "body": chat_body(i)}
        for i in range(CHAT_LINES)
    ]
    lines[7]["body"]["messages"] = "not a list"  # malformed
    lines[8]["body"]["n"] = 1000  # over the server's bound: refused when the line runs
    lines[9]["body"]["messages"][1]["content"] = "word " * 3000  # longer than the model's context
    return lines


@pytest.mark.slow
def test_sixty_four_chat_lines_match_what_they_give_live(
    seeded: openai.OpenAI, chat_lines: list[dict[str, Any]]
) -> None:
    client = seeded
    uploaded = client.files.create(file=("chat.jsonl", jsonl(chat_lines)), purpose="batch")
    assert uploaded.purpose == "batch"
    assert uploaded.bytes == len(jsonl(chat_lines))
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert batch.status in ("validating", "in_progress")
    batch = wait(client, batch.id)
    assert batch.status == "completed"
    assert batch.request_counts.total == CHAT_LINES
    assert batch.request_counts.failed == 3
    assert batch.request_counts.completed == CHAT_LINES - 3
    outputs, errors = lines_of(client, batch.output_file_id), lines_of(client, batch.error_file_id)
    assert set(errors) == {"chat-7", "chat-8", "chat-9"}
    assert errors["chat-7"]["response"]["status_code"] == 400
    assert errors["chat-7"]["response"]["body"]["error"]["param"] == "messages"
    assert errors["chat-8"]["response"]["status_code"] == 400
    assert errors["chat-8"]["response"]["body"]["error"]["param"] == "n"
    assert errors["chat-9"]["response"]["body"]["error"]["code"] == "context_length_exceeded"
    assert len(outputs) == CHAT_LINES - 3
    for i in (0, 1, 17, 40, 63):  # seeded: the same answer live
        live = client.chat.completions.create(**chat_body(i))
        body = outputs[f"chat-{i}"]["response"]["body"]
        assert outputs[f"chat-{i}"]["response"]["status_code"] == 200
        assert body["choices"][0]["message"]["content"] == live.choices[0].message.content
    assert batch.usage is not None
    assert batch.usage.output_tokens > 0


@pytest.mark.one_face
@pytest.mark.slow
def test_five_hundred_embedding_lines_equal_live_embeddings(client: Any) -> None:
    texts = [
        f"sentence number {i} about {['cats', 'ships', 'rain', 'tea'][i % 4]}" for i in range(EMBEDDING_LINES)
    ]
    lines = [
        {
            "custom_id": f"e{i}",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": "all-minilm-l6-v2", "input": text},
        }
        for i, text in enumerate(texts)
    ]
    uploaded = client.files.create(file=io.BytesIO(jsonl(lines)), purpose="batch")
    batch = wait(
        client,
        client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
        ).id,
    )
    assert batch.status == "completed"
    assert batch.request_counts.completed == EMBEDDING_LINES
    assert batch.error_file_id is None
    outputs = lines_of(client, batch.output_file_id)
    live = client.embeddings.create(model="all-minilm-l6-v2", input=texts[:64])
    for i, row in enumerate(live.data):
        assert outputs[f"e{i}"]["response"]["body"]["data"][0]["embedding"] == pytest.approx(
            row.embedding, abs=1e-6
        )


@pytest.mark.one_face
@pytest.mark.slow
def test_a_cancelled_batch_keeps_what_it_did(client: Any) -> None:
    lines = [
        {
            "custom_id": f"long-{i}",
            "method": "POST",
            "url": "/v1/completions",
            "body": {"model": "smollm2-135m-instruct", "prompt": f"{i}. Once", "max_tokens": 30,
                     "logit_bias": {"0": -100, "2": -100}},
        }
        for i in range(60)
    ]  # fmt: skip
    uploaded = client.files.create(file=("long.jsonl", jsonl(lines)), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 60
    while client.batches.retrieve(batch.id).request_counts.completed < 1:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert client.batches.cancel(batch.id).status == "cancelling"
    done = wait(client, batch.id, 120)
    assert done.status == "cancelled"
    assert done.cancelled_at is not None
    outputs = lines_of(client, done.output_file_id)
    assert 1 <= len(outputs) < 60
    assert done.request_counts.completed == len(outputs)
    assert all(len(o["response"]["body"]["choices"][0]["text"]) > 0 for o in outputs.values())


LINE = {
    "custom_id": "a",
    "method": "POST",
    "url": "/v1/embeddings",
    "body": {"model": "text-embedding-3-small", "input": "a line"},
}


@pytest.mark.parametrize(
    ("lines", "code", "line", "param"),
    [
        ([json.dumps(LINE), "not json"], "invalid_json_line", 2, None),
        ([json.dumps(LINE)] * 2, "duplicate_custom_id", 2, "custom_id"),
        ([json.dumps({**LINE, "custom_id": None})], "missing_required_parameter", 1, "custom_id"),
        ([json.dumps({**LINE, "url": "/v1/images"})], "invalid_url", 1, "url"),
        (
            [json.dumps({**LINE, "body": {**LINE["body"], "stream": True}})],
            "streaming_unsupported",
            1,
            "body.stream",
        ),
        ([json.dumps({**LINE, "body": {"model": "no-such-model"}})], "model_not_found", 1, "body.model"),
        ([json.dumps({**LINE, "body": {"input": "x"}})], "missing_required_parameter", 1, "body.model"),
        # What the endpoint's request requires, as OpenAI says it ("Input parameter is required.").
        (
            [json.dumps({**LINE, "body": {"model": "text-embedding-3-small"}})],
            "invalid_request",
            1,
            "body.input",
        ),
        ([], "empty_file", None, None),
    ],
)
def test_a_bad_batch_input_is_uploaded_and_its_batch_fails_validating_naming_each_line(
    client: Any, lines: list[str], code: str, line: int | None, param: str | None
) -> None:
    # As OpenAI: the file is taken, the batch is made, and it fails while it validates.
    uploaded = client.files.create(
        file=("bad.jsonl", "".join(f"{x}\n" for x in lines).encode()), purpose="batch"
    )
    made = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
    )
    assert made.status == "validating"
    failed = wait(client, made.id, 30)
    assert failed.status == "failed"
    assert failed.failed_at is not None
    assert failed.output_file_id is None
    error = failed.errors.data[-1]
    assert (error.code, error.line, error.param) == (code, line, param)
    assert error.message
    with pytest.raises(openai.ConflictError):  # a batch that has ended cannot be cancelled
        client.batches.cancel(failed.id)


def test_a_batch_s_own_parameters_are_checked_when_it_is_made(client: Any) -> None:
    uploaded = client.files.create(file=("e.jsonl", (json.dumps(LINE) + "\n").encode()), purpose="batch")
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(input_file_id=uploaded.id, endpoint="/v1/images", completion_window="24h")
    assert (caught.value.body["param"], caught.value.body["code"]) == ("endpoint", "invalid_value")
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(
            input_file_id=uploaded.id,
            endpoint="/v1/embeddings",
            completion_window="24h",
            extra_body={"priority": "high"},
        )
    assert caught.value.body["param"] == "priority"


def test_a_batch_on_a_file_that_is_not_there_is_made_and_fails_validating(client: Any) -> None:
    # As OpenAI: an unknown input file, or one deleted before the batch ran, fails the batch, not the call.
    gone = client.files.create(file=("e.jsonl", (json.dumps(LINE) + "\n").encode()), purpose="batch")
    client.files.delete(gone.id)
    for file_id in ("file-nope", gone.id):
        made = client.batches.create(
            input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h"
        )
        assert made.status == "validating"
        failed = wait(client, made.id, 30)
        assert failed.status == "failed"
        error = failed.errors.data[0]
        # OpenAI's code, param and words (Llama Stack's batch suite records OpenAI's answer).
        assert (error.code, error.param, error.line) == ("invalid_request", "file_id", None)
        assert error.message.startswith(f"Cannot find file {file_id}, or ")


def test_files_list_retrieve_and_delete(client: Any) -> None:
    note = client.files.create(file=("note.txt", b"hello"), purpose="user_data")
    assert client.files.retrieve(note.id).filename == "note.txt"
    assert client.files.content(note.id).content == b"hello"
    assert note.id in [f.id for f in client.files.list(purpose="user_data")]
    assert note.id not in [f.id for f in client.files.list(purpose="batch")]
    assert client.files.delete(note.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(note.id)
    uploaded = client.files.create(file=("e.jsonl", (json.dumps(LINE) + "\n").encode()), purpose="batch")
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="1h")
    assert caught.value.body["param"] == "completion_window"


def test_an_upload_over_the_bound_is_a_413(tmp_path: Path) -> None:
    with faces(Settings(defaults=False, files=FileSettings(max_bytes=1000))) as live:
        small = live.http
        with pytest.raises(openai.APIStatusError) as caught:
            small.files.create(file=("big.bin", b"x" * 5000), purpose="user_data")
        assert caught.value.status_code == 413
        assert small.files.create(file=("ok.bin", b"x" * 900), purpose="user_data").bytes == 900
        # A name longer than the store holds (one of 3,000 characters was a 500 on PostgreSQL).
        with pytest.raises(openai.BadRequestError) as long_name:
            small.files.create(file=("n" * 513, b"x"), purpose="user_data")
        assert long_name.value.body["param"] == "file"
        assert small.files.create(file=("n" * 512, b"x"), purpose="user_data").filename == "n" * 512


def test_a_batch_cancelled_as_soon_as_it_is_made_ends_cancelled(client: Any) -> None:
    # The runner's validating → in_progress write used to land after the cancel's and undo it (2 of 3).
    lines = [
        LINE | {"custom_id": f"l{i}", "body": {"model": "text-embedding-3-small", "input": "x"}}
        for i in range(20)
    ]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    uploaded = client.files.create(file=("e.jsonl", content), purpose="batch")
    ended = []
    for _ in range(4):
        made = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
        )
        assert client.batches.cancel(made.id).status == "cancelling"
        ended.append(wait(client, made.id, 60))
    assert [(b.status, b.cancelled_at is not None) for b in ended] == [("cancelled", True)] * 4


@pytest.mark.parametrize("in_flight", [1, 16], ids=["one-line-at-a-time", "lines-waiting-for-the-slot"])
def test_no_line_of_a_batch_cancelled_here_starts_after_the_cancel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_flight: int
) -> None:
    """A cancel stops the batch's lines at once on the server that took it: those running finish, no other
    starts, nor one of those in flight still waiting for the model's slot (a batch takes a share of them).
    Before, the runner heard of it at its next heartbeat, up to 2 s later, starting lines until then, and
    every line in flight ran (60 lines of SmolLM2 cancelled once 8 were written: 32 written, cancelled 5.5 s
    later; now 10, the 2 holding a slot finishing, 0.35 s)."""
    calls = tmp_path / "calls.txt"
    calls.touch()
    monkeypatch.setenv("MODELPORT_TEST_CALLS", str(calls))
    counted = ModelConfig(id="counted", predictor="tests.predictors.tiny_models:counted_chat", concurrency=1)
    settings = Settings(defaults=False, models=[counted], batches=BatchSettings(concurrency=in_flight),
                        store=StoreSettings(url=f"sqlite:///{tmp_path}/db.sqlite"))  # fmt: skip
    lines = [
        {"custom_id": f"l{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "counted", "messages": [{"role": "user", "content": f"line {i}"}]}}
        for i in range(200)
    ]  # fmt: skip
    with modelport.OpenAI(settings=settings) as client:
        uploaded = client.files.create(file=("c.jsonl", jsonl(lines)), purpose="batch")
        made = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        deadline = time.monotonic() + 30
        while len(calls.read_text().splitlines()) < 3:  # under way (each line takes 20 ms)
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert client.batches.cancel(made.id).status == "cancelling"
        started = len(calls.read_text().splitlines())
        ended = wait(client, made.id, 60)
    assert ended.status == "cancelled"
    assert ended.request_counts is not None
    assert len(calls.read_text().splitlines()) <= started + 1  # the one line running as the cancel came
    assert ended.request_counts.completed == len(calls.read_text().splitlines())


@pytest.mark.parametrize("after", [0.0, 0.05, 0.2, 0.5, 1.0])
def test_a_batch_whose_input_is_deleted_at_any_moment_ends(client: Any, after: float) -> None:
    # Deleted while it ran, a batch's input once left it `in_progress` for good, failing every 5 s.
    lines = [json.dumps({**LINE, "custom_id": f"l{i}", "body": {**LINE["body"], "input": f"line {i}"}})
             for i in range(40)]  # fmt: skip
    uploaded = client.files.create(file=("del.jsonl", "\n".join(lines).encode()), purpose="batch")
    made = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
    )
    time.sleep(after)
    client.files.delete(uploaded.id)
    ended = wait(client, made.id, 60)
    assert ended.status in ("failed", "completed")  # completed: it had run every line before the delete
    if ended.status == "failed":
        error = ended.errors.data[0]
        assert (error.code, error.param) == ("invalid_request", "file_id")
        assert uploaded.id in error.message


def test_a_batch_its_server_stopped_while_finishing_ends_at_the_next_look(tmp_path: Path) -> None:
    """A batch left `finalizing` (its server stopped between that write and the end) is taken up by the next
    runner and ends as the first would have, its files made again (before, it was finished again and left
    `finalizing`, to be taken up again at every look, for ever)."""
    lines = [
        {"custom_id": f"{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "reverse", "messages": [{"role": "user", "content": f"line {i}"}]}}
        for i in range(3)
    ]  # fmt: skip

    async def run() -> tuple[Any, Any]:
        async with modelport.AsyncOpenAI(settings=tiny_settings(str(tmp_path / "state.db"))) as client:
            uploaded = await client.files.create(file=("lines.jsonl", jsonl(lines)), purpose="batch")
            made = await client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            done = await asyncio.wait_for(ended(client, made.id), 30)
            store, runner = client.service.store, client.service.batches.runner
            left = {**done.model_dump(mode="json"), "status": "finalizing", "completed_at": None}
            assert await store.batches.put(left) is None  # as the runner left it, under its lease
            runner.wake()
            return done, await asyncio.wait_for(ended(client, made.id), 30)

    first, again = asyncio.run(run())
    assert first.status == again.status == "completed"
    assert again.request_counts == first.request_counts
    assert again.output_file_id == first.output_file_id  # its id is the batch's: the same file made again


async def ended(client: Any, batch_id: str) -> Any:
    """The batch once it has ended, looked at every 50 ms."""
    for _ in itertools.count():
        batch = await client.batches.retrieve(batch_id)
        if batch.status in ENDED:
            return batch
        await asyncio.sleep(0.05)
    raise AssertionError("unreachable")
