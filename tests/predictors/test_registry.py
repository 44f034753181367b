"""User predictors registered in code or listed in a models.toml, served through both faces."""

from __future__ import annotations

import io
import textwrap
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import openai
import pytest

import modelport
from modelport import ModelRegistry
from modelport.errors import PredictorContractError
from modelport.service import Service
from modelport.settings import Settings
from tests.predictors import tiny_models
from tests.support.faces import faces
from tests.support.live import ROOT, LiveServer


@pytest.fixture(scope="module")
def tiny_client() -> Iterator[modelport.OpenAI]:
    registry = ModelRegistry({"gpt-4o-mini": "reverse"})
    registry.add_predictor("trigram", tiny_models.trigram_embed)
    registry.add_predictor("matryoshka", tiny_models.matryoshka_embed)
    registry.add_predictor("tones", tiny_models.tone_speech, tiny_models.loudness_transcriber)
    registry.add_predictor("reverse", tiny_models.reverse_chat)
    registry.add_predictor("count", tiny_models.count_chat)
    registry.add_predictor("float64", tiny_models.wrong_dtype_embed)
    registry.add_predictor("extra-row", tiny_models.wrong_shape_embed)
    registry.add_predictor("broken", tiny_models.failing_chat)
    client = modelport.OpenAI(service=Service(registry))
    yield client
    client.close()


def test_registering_a_bad_predictor_fails_at_once() -> None:
    def embed(texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    with pytest.raises(PredictorContractError, match="embed"):
        ModelRegistry().add_predictor("bad", embed, capability="embedding")


def test_streamed_chunks_become_a_whole_completion(tiny_client: modelport.OpenAI) -> None:
    reply = tiny_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "one two three four"}], max_tokens=3
    )
    assert reply.model == "reverse"
    assert reply.choices[0].message.content == "four three two"
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 3


def test_a_whole_completion_becomes_a_stream(tiny_client: modelport.OpenAI) -> None:
    chunks = list(
        tiny_client.chat.completions.create(
            model="count", messages=[{"role": "user", "content": "a b c"}], stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "1 messages, 3 words"
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_service_truncates_for_a_plain_embedder_and_delegates_to_a_matryoshka_one(
    tiny_client: modelport.OpenAI,
) -> None:
    plain = tiny_client.embeddings.create(
        model="trigram", input=["kitten", "kittens", "zebra"], dimensions=32
    )
    own = tiny_client.embeddings.create(model="matryoshka", input=["kitten"], dimensions=32)
    vectors = np.array([d.embedding for d in plain.data])
    assert vectors.shape == (3, 32)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert np.allclose(own.data[0].embedding, vectors[0], atol=1e-6)
    with pytest.raises(openai.BadRequestError):
        tiny_client.embeddings.create(model="trigram", input="x", dimensions=65)


def test_speech_downmixes_resamples_and_transcription_resamples_back(tiny_client: modelport.OpenAI) -> None:
    audio = tiny_client.audio.speech.create(
        model="tones", voice="high", input="abcdefghij", response_format="wav"
    )
    with wave.open(io.BytesIO(audio.content)) as w:
        assert (w.getframerate(), w.getnchannels()) == (24000, 1)
        assert abs(w.getnframes() / 24000 - 0.8) < 0.02
    heard = tiny_client.audio.transcriptions.create(model="tones", file=audio.content)
    assert heard.text == "0.8 seconds of sound"
    mapped = tiny_client.audio.speech.create(model="tones", voice="alloy", input="ab", response_format="pcm")
    assert len(mapped.content) == 2 * int(0.16 * 24000)


def test_a_contract_breach_at_call_time_is_a_500_naming_the_predictor(tiny_client: modelport.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        tiny_client.embeddings.create(model="float64", input="x")
    assert "wrong_dtype_embed" in caught.value.message
    assert "float64" in caught.value.message
    with pytest.raises(openai.InternalServerError) as caught:
        tiny_client.embeddings.create(model="extra-row", input=["x", "y"])
    assert "wrong_shape_embed" in caught.value.message
    assert "(3, " in caught.value.message
    assert tiny_client.embeddings.create(model="trigram", input="x").data  # the others serve on


def test_a_predictor_that_raises_is_a_500_naming_it(tiny_client: modelport.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        tiny_client.chat.completions.create(model="broken", messages=[{"role": "user", "content": "x"}])
    assert "failing_chat" in caught.value.message
    assert "the weights are on fire" in caught.value.message


def test_models_toml_serves_user_predictors_over_http(tmp_path: Path) -> None:
    config = textwrap.dedent(
        """
        defaults = false
        [aliases]
        "text-embedding-3-small" = "trigram"

        [[models]]
        id = "trigram"
        predictor = "tests.predictors.tiny_models:trigram_embed"

        [[models]]
        id = "reverse"
        predictor = "tests.predictors.tiny_models:reverse_chat"
        concurrency = 2
        """
    )
    (tmp_path / "models.toml").write_text(config)
    with faces(Settings.from_toml(tmp_path / "models.toml")) as live:
        client = live.http
        assert [m.id for m in client.models.list()] == ["trigram", "reverse"]
        vectors = client.embeddings.create(model="text-embedding-3-small", input=["abc", "abd"])
        assert vectors.model == "trigram"
        assert len(vectors.data[0].embedding) == 64
        chunks = client.chat.completions.create(
            model="reverse", messages=[{"role": "user", "content": "b a"}], stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "a b"


@pytest.mark.slow
def test_a_bad_predictor_in_models_toml_stops_the_server_with_its_name(tmp_path: Path) -> None:
    config = tmp_path / "models.toml"
    config.write_text(
        'defaults = false\n[[models]]\nid = "x"\npredictor = "tests.predictors.tiny_models:VOICES"\n'
    )
    live = LiveServer("--config", str(config), cwd=ROOT)
    try:
        with pytest.raises(RuntimeError, match="tiny_models"):
            live.wait_ready()
    finally:
        live.stop()
