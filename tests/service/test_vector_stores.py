"""The Vector Stores API over both faces, on the default embedding model (all-MiniLM-L6-v2): files chunked
by its tokenizer in the background, searched by embedding and by words, filtered by their attributes."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.support.documents import pdf

CATS = b"Cats are small domesticated carnivorous mammals. A cat purrs, sleeps most of the day and hunts mice."
ROCKETS = b"A rocket engine burns liquid oxygen and kerosene to make thrust for the launch vehicle."
REVENUE = "Quarterly revenue grew by 12 percent on strong subscription sales"


def library(client: Any) -> Any:
    """A store of three files, one of them a PDF, each with its attributes."""
    ids = [
        client.files.create(file=(name, content), purpose="assistants").id
        for name, content in (("cats.txt", CATS), ("rockets.md", ROCKETS), ("q3.pdf", pdf(REVENUE)))
    ]
    attributes = [
        {"topic": "animals", "year": 2023, "public": True},
        {"topic": "space", "year": 2020, "public": True},
        {"topic": "finance", "year": 2024, "public": False},
    ]
    store = client.vector_stores.create(name="library", metadata={"team": "tests"})
    batch = client.vector_stores.file_batches.create_and_poll(
        store.id, files=[{"file_id": i, "attributes": a} for i, a in zip(ids, attributes, strict=True)]
    )
    assert batch.status == "completed"
    failed = [
        (f.id, f.last_error)
        for f in client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)
        if f.status != "completed"
    ]
    assert batch.file_counts.completed == 3, failed
    return client.vector_stores.retrieve(store.id)


def names(page: Any) -> list[str]:
    return [result.filename for result in page.data]


@pytest.mark.one_face
def test_a_store_of_three_files_is_searched_by_meaning_words_and_attributes(client: Any) -> None:
    store = library(client)
    assert store.status == "completed"
    assert store.file_counts.completed == store.file_counts.total == 3
    assert store.usage_bytes > 0
    assert (
        names(client.vector_stores.search(store.id, query="what fuel does a rocket use?"))[0] == "rockets.md"
    )
    assert names(client.vector_stores.search(store.id, query="how much did sales grow?"))[0] == "q3.pdf"
    recent_not_animals = {
        "type": "and",
        "filters": [
            {"type": "gte", "key": "year", "value": 2021},
            {"type": "ne", "key": "topic", "value": "animals"},
        ],
    }
    found = client.vector_stores.search(store.id, query="anything", filters=recent_not_animals)
    assert names(found) == ["q3.pdf"]
    assert found.data[0].attributes == {"topic": "finance", "year": 2024, "public": False}
    either = {"type": "or", "filters": [{"type": "eq", "key": "public", "value": False},
                                        {"type": "in", "key": "topic", "value": ["space"]}]}  # fmt: skip
    assert set(names(client.vector_stores.search(store.id, query="x", filters=either))) == {
        "q3.pdf", "rockets.md",
    }  # fmt: skip
    both = client.vector_stores.search(store.id, query=["cats", "kerosene"], max_num_results=2)
    assert set(names(both)) == {"cats.txt", "rockets.md"}
    assert (
        client.vector_stores.search(store.id, query="rocket", ranking_options={"score_threshold": 0.99}).data
        == []
    )


def test_the_word_ranking_finds_only_what_holds_the_words_and_the_meaning_ranking_finds_the_rest(
    client: Any,
) -> None:
    store = library(client)
    words_only = {"hybrid_search": {"embedding_weight": 0, "text_weight": 1}}
    found = client.vector_stores.search(store.id, query="kerosene", ranking_options=words_only)
    assert names(found)[0] == "rockets.md"  # the only file with the word ranks first
    # A word the text holds in another form ("hunting" → "hunts"): the word index stems it.
    assert names(client.vector_stores.search(store.id, query="hunting", ranking_options=words_only))[0] == (
        "cats.txt"
    )
    meaning_only = {"hybrid_search": {"embedding_weight": 1, "text_weight": 0}}
    assert (
        len(client.vector_stores.search(store.id, query="kerosene", ranking_options=meaning_only).data) == 3
    )


def test_files_are_listed_changed_read_and_taken_out(client: Any) -> None:
    store = library(client)
    listed = client.vector_stores.files.list(store.id, filter="completed", order="asc")
    assert len(listed.data) == 3
    first = listed.data[0]
    assert first.chunking_strategy.static.max_chunk_size_tokens == 254  # what MiniLM reads, less [CLS] [SEP]
    assert first.chunking_strategy.static.chunk_overlap_tokens == 127
    assert client.vector_stores.files.list(store.id, filter="failed").data == []
    changed = client.vector_stores.files.update(first.id, vector_store_id=store.id, attributes={"topic": "x"})
    assert changed.attributes == {"topic": "x"}
    content = client.vector_stores.files.content(first.id, vector_store_id=store.id)
    assert "Cats are small" in content.data[0].text
    page = client.vector_stores.files.list(store.id, limit=2, order="asc")
    assert page.has_more
    assert len(page.data) == 2
    rest = client.vector_stores.files.list(store.id, after=page.data[-1].id, order="asc")
    assert [f.id for f in rest.data] == [listed.data[2].id]
    assert client.vector_stores.files.delete(first.id, vector_store_id=store.id).deleted
    assert client.vector_stores.retrieve(store.id).file_counts.total == 2
    assert "cats.txt" not in names(client.vector_stores.search(store.id, query="cats purr"))
    assert client.files.retrieve(first.id).id == first.id  # the file itself stays
    assert client.vector_stores.update(store.id, name="renamed").name == "renamed"
    assert client.vector_stores.delete(store.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.retrieve(store.id)


@pytest.mark.one_face
def test_long_text_is_cut_into_overlapping_chunks_the_model_reads_whole(client: Any) -> None:
    words = " ".join(f"word{i}" for i in range(400)).encode()
    file = client.files.create(file=("long.txt", words), purpose="assistants")
    store = client.vector_stores.create()
    strategy = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 20}}
    done = client.vector_stores.files.create_and_poll(
        file.id, vector_store_id=store.id, chunking_strategy=strategy
    )
    assert done.status == "completed"
    chunks = [
        part.text for part in client.vector_stores.files.content(file.id, vector_store_id=store.id).data
    ]
    assert len(chunks) > 10
    assert chunks[0].startswith("word0 ")
    assert chunks[-1].endswith("word399")
    assert chunks[0].split()[-1] in chunks[1]  # each starts before the last one ended


@pytest.mark.one_face
def test_a_file_that_cannot_be_read_fails_with_why(client: Any) -> None:
    file = client.files.create(file=("blob.bin", bytes(range(256)) * 8), purpose="assistants")
    store = client.vector_stores.create()
    done = client.vector_stores.files.create_and_poll(file.id, vector_store_id=store.id)
    assert done.status == "failed"
    assert done.last_error.code == "unsupported_file"
    assert client.vector_stores.retrieve(store.id).file_counts.failed == 1


@pytest.mark.one_face
def test_a_cancelled_batch_says_so(client: Any) -> None:
    file = client.files.create(file=("a.txt", b"Some words to keep."), purpose="assistants")
    store = client.vector_stores.create()
    batch = client.vector_stores.file_batches.create(store.id, file_ids=[file.id])
    cancelled = client.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id)
    assert cancelled.status == "cancelled"
    counts = cancelled.file_counts
    assert counts.cancelled + counts.completed == counts.total == 1
    files = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)
    assert [f.id for f in files.data] == [file.id]


def note(client: Any) -> str:
    """A small file's id."""
    return str(client.files.create(file=("a.txt", b"a"), purpose="assistants").id)


@pytest.mark.parametrize(
    ("call", "param"),
    [
        (lambda c, s: c.vector_stores.retrieve("vs_missing"), "vector_store_id"),
        (lambda c, s: c.vector_stores.create(file_ids=["file-missing"]), "file_ids[0]"),
        (lambda c, s: c.vector_stores.search(s, query="x", filters={"type": "like", "key": "a", "value": 1}),
         "filters.type"),
        (lambda c, s: c.vector_stores.search(s, query="x", filters={"type": "and", "filters": []}),
         "filters.filters"),
        (lambda c, s: c.vector_stores.search(s, query="x", filters={"type": "in", "key": "a", "value": 3}),
         "filters.value"),
        (lambda c, s: c.vector_stores.search(s, query=""), "query"),
        (lambda c, s: c.vector_stores.search(s, query="x", ranking_options={"score_threshold": 2}),
         "ranking_options.score_threshold"),
        (lambda c, s: c.vector_stores.create(chunking_strategy={"type": "static", "static": {
            "max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}),
         "chunking_strategy.static.max_chunk_size_tokens"),
        (lambda c, s: c.vector_stores.create(chunking_strategy={"type": "static", "static": {
            "max_chunk_size_tokens": 50, "chunk_overlap_tokens": 0}}),
         "chunking_strategy.static.max_chunk_size_tokens"),
        (lambda c, s: c.vector_stores.create(chunking_strategy={"type": "static", "static": {
            "max_chunk_size_tokens": 200, "chunk_overlap_tokens": 150}}),
         "chunking_strategy.static.chunk_overlap_tokens"),
        (lambda c, s: c.vector_stores.create(expires_after={"anchor": "created_at", "days": 1}),
         "expires_after"),
        (lambda c, s: c.vector_stores.files.list(s, filter="lost"), "filter"),
        (lambda c, s: c.vector_stores.search(s, query="x", ranking_options={"hybrid_search": 3}),
         "ranking_options.hybrid_search"),
        (lambda c, s: c.vector_stores.file_batches.create(s, files=[{"file_id": note(c),
                                                                     "chunking_strategy": 7}]),
         "files[0].chunking_strategy"),
        (lambda c, s: c.vector_stores.file_batches.list_files("vsfb_missing", vector_store_id=s), "batch_id"),
    ],
)  # fmt: skip
def test_bad_input_is_a_4xx_naming_it(client: Any, call: Any, param: str) -> None:
    store = client.vector_stores.create()
    with pytest.raises((openai.BadRequestError, openai.NotFoundError)) as caught:
        call(client, store.id)
    assert caught.value.body["param"] == param


def test_stores_are_listed_newest_first_and_paged_both_ways(client: Any) -> None:
    made = [client.vector_stores.create(name=f"page {i}").id for i in range(3)]
    newest = client.vector_stores.list(limit=2)
    assert [s.id for s in newest.data] == made[::-1][:2]
    older = client.vector_stores.list(after=newest.data[-1].id, limit=1)
    assert [s.id for s in older.data] == [made[0]]
    newer = client.vector_stores.list(before=made[0], limit=1)
    assert [s.id for s in newer.data] == [made[1]]


@pytest.mark.one_face
def test_an_expiry_is_kept_and_moves_with_use(client: Any) -> None:
    store = client.vector_stores.create(expires_after={"anchor": "last_active_at", "days": 2})
    assert store.expires_after.days == 2
    assert store.expires_at == store.last_active_at + 2 * 86400


@pytest.mark.one_face
def test_llama_stack_s_fields_are_taken(client: Any) -> None:
    # Llama Stack's clients send these beside `embedding_model`: the dimension is checked, the provider
    # (a vector backend there; one database here) accepted.
    fields = {"embedding_model": "all-minilm-l6-v2", "embedding_dimension": 384, "provider_id": "faiss"}
    store = client.vector_stores.create(name="stack", extra_body=fields)
    assert store.status == "completed"
    with pytest.raises(openai.BadRequestError) as caught:
        client.vector_stores.create(name="stack", extra_body={**fields, "embedding_dimension": 768})
    assert caught.value.body["param"] == "embedding_dimension"
    assert "384" in caught.value.body["message"]
