"""Chat answers asked for as audio (`modalities: ["audio"]`): spoken by the server's speech model, whole or
streamed clause by clause, heard back by its transcription model; a later turn names them by `audio.id`.
`recall` answers with what it was given, so what is said is known."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from modelport import context
from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest
from modelport.settings import DEFAULT_SPEECH, DEFAULT_TRANSCRIPTION, ModelConfig, Settings
from tests.service.test_audio import word_error_rate
from tests.support.faces import Faces, faces
from tests.support.wav import wav

pytestmark = pytest.mark.models  # real models: not the unit tier

SAID = "The library opens at nine in the morning. It closes at six in the evening."
HEARD = f"user: {SAID}"  # what recall answers
SPOKEN = {"voice": "alloy", "format": "wav"}


@pytest.fixture(scope="module")
def speaking() -> Iterator[Faces]:
    models = [
        ModelConfig(id="recall", predictor="tests.predictors.tiny_models:recall_chat"),
        ModelConfig(id=DEFAULT_SPEECH, engine="piper"),
        ModelConfig(id=DEFAULT_TRANSCRIPTION, engine="faster-whisper"),
    ]
    with faces(Settings(defaults=False, models=models)) as served:
        yield served


def heard(client: Any, audio: bytes, name: str = "answer.wav") -> str:
    return str(client.audio.transcriptions.create(model="whisper-1", file=(name, audio)).text)


@pytest.mark.parametrize("face", ["http", "in-process"])
def test_an_answer_asked_for_as_audio_is_spoken_whole(speaking: Faces, face: str) -> None:
    client = speaking.face(face)
    answer = client.chat.completions.create(
        model="recall",
        messages=[{"role": "user", "content": SAID}],
        modalities=["text", "audio"],
        audio=SPOKEN,  # type: ignore[arg-type]
    )
    message = answer.choices[0].message
    assert message.content is None
    assert message.audio is not None
    assert message.audio.transcript == HEARD
    assert message.audio.id.startswith("audio_")
    assert abs(message.audio.expires_at - (time.time() + 3600)) < 60
    audio = base64.b64decode(message.audio.data)
    assert audio[:4] == b"RIFF"
    assert word_error_rate(HEARD, heard(client, audio)) <= 0.25


@pytest.mark.parametrize(("face", "fmt"), [("http", "pcm16"), ("in-process", "mp3")])
def test_a_streamed_answer_is_spoken_clause_by_clause(speaking: Faces, face: str, fmt: str) -> None:
    client = speaking.face(face)
    stream = client.chat.completions.create(
        model="recall",
        messages=[{"role": "user", "content": SAID}],
        modalities=["text", "audio"],
        audio={"voice": "alloy", "format": fmt},  # type: ignore[typeddict-item]
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert all(not c.choices or c.choices[0].delta.content is None for c in chunks)
    pieces = [c.choices[0].delta.audio for c in chunks if c.choices and c.choices[0].delta.audio]
    transcript = "".join(p.transcript or "" for p in pieces)
    assert transcript == HEARD
    assert [p.id for p in pieces if p.id] == [pieces[0].id]  # the id once, first
    assert pieces[-1].expires_at
    assert not (pieces[-1].data)
    assert not (pieces[-1].transcript)
    data = [p.data for p in pieces if p.data]
    assert len(data) >= 2  # spoken clause by clause, not once at the end
    # The pieces joined are the whole audio (no padding before the last), and raw ones hold whole samples.
    assert not any("=" in d for d in data[:-1])
    assert fmt != "pcm16" or all(len(base64.b64decode(d)) % 2 == 0 for d in data)
    audio = base64.b64decode("".join(data))
    spoken = [
        i
        for i, c in enumerate(chunks)
        if c.choices and c.choices[0].delta.audio and c.choices[0].delta.audio.data
    ]
    ends = [i for i, c in enumerate(chunks) if c.choices and c.choices[0].finish_reason]
    assert ends
    assert ends[0] > spoken[-1]
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0
    said = heard(
        client, wav(audio, 24_000) if fmt == "pcm16" else audio, f"answer.{'wav' if fmt == 'pcm16' else fmt}"
    )
    assert word_error_rate(HEARD, said) <= 0.25


@pytest.mark.parametrize("face", ["http", "in-process"])
def test_a_later_turn_names_earlier_audio_by_its_id(speaking: Faces, face: str) -> None:
    client = speaking.face(face)
    first = client.chat.completions.create(
        model="recall",
        messages=[{"role": "user", "content": SAID}],
        modalities=["text", "audio"],
        audio=SPOKEN,  # type: ignore[arg-type]
    )
    assert first.choices[0].message.audio is not None
    audio_id = first.choices[0].message.audio.id
    later = client.chat.completions.create(
        model="recall",
        messages=[
            {"role": "user", "content": SAID},
            {"role": "assistant", "audio": {"id": audio_id}},
            {"role": "user", "content": "And on Sundays?"},
        ],
    )
    assert f"assistant: {HEARD}" in str(later.choices[0].message.content)


def test_audio_of_another_project_cannot_be_named(speaking: Faces) -> None:
    first = speaking.inprocess.chat.completions.create(
        model="recall",
        messages=[{"role": "user", "content": SAID}],
        modalities=["text", "audio"],
        audio=SPOKEN,  # type: ignore[arg-type]
    )
    assert first.choices[0].message.audio is not None
    later = ChatCompletionRequest.model_validate(
        {
            "model": "recall",
            "messages": [{"role": "assistant", "audio": {"id": first.choices[0].message.audio.id}}],
        }
    )
    assert speaking.service.spoken.recall(later).messages[0].content == HEARD
    context.enter(context.RequestContext(project="proj_other"))
    try:
        with pytest.raises(InvalidRequestError) as refused:
            speaking.service.spoken.recall(later)
        assert refused.value.param == "messages[0].audio.id"
    finally:
        context.enter(context.RequestContext())


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"modalities": ["text", "audio"]}, "audio"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "nobody", "format": "wav"}}, "audio.voice"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "ogg"}}, "audio.format"),
        ({"modalities": ["text", "smell"]}, "modalities[1]"),
        ({"messages": [{"role": "assistant", "audio": {"id": "audio_unknown"}}]}, "messages[0].audio.id"),
    ],
)
@pytest.mark.parametrize("face", ["http", "in-process"])
def test_bad_audio_requests_are_a_400_naming_the_field(
    speaking: Faces, face: str, extra: dict[str, Any], param: str
) -> None:
    body: dict[str, Any] = {"model": "recall", "messages": [{"role": "user", "content": "Hi."}], **extra}
    with pytest.raises(openai.BadRequestError) as refused:
        speaking.face(face).chat.completions.create(**body)
    assert refused.value.status_code == 400
    assert refused.value.body["param"] == param  # type: ignore[index]
