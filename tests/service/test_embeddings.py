"""Embeddings on the default all-MiniLM-L6-v2 model, over HTTP and in-process."""

from __future__ import annotations

import base64

import numpy as np
import openai
import pytest
from openai.types import CreateEmbeddingResponse


def _matrix(response: CreateEmbeddingResponse) -> np.ndarray:
    return np.array([d.embedding for d in response.data], dtype=np.float32)


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


@pytest.mark.parametrize("bad", ["", [], ["ok", ""]])
def test_empty_input_is_a_400(client: openai.OpenAI, bad: object) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model="all-minilm-l6-v2", input=bad)  # type: ignore[arg-type]
    assert caught.value.param == "input"
