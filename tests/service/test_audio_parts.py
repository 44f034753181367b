"""Audio in chat messages: an `input_audio` part reaches a model without an audio projector (every model
here) as what the server's transcription model hears in it. `recall` answers with what it was given."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from modelport.settings import DEFAULT_TRANSCRIPTION, ModelConfig, Settings
from tests.support.faces import Faces, faces

SAID = "The library opens at nine in the morning."


@pytest.fixture(scope="module")
def listening() -> Iterator[Faces]:
    models = [
        ModelConfig(id="recall", predictor="tests.predictors.tiny_models:recall_chat"),
        ModelConfig(id=DEFAULT_TRANSCRIPTION, engine="faster-whisper"),
    ]
    with faces(Settings(defaults=False, preload=False, models=models)) as served:
        yield served


def spoken(inprocess_client: Any) -> str:
    wav = inprocess_client.audio.speech.create(
        model="tts-1", voice="alloy", input=SAID, response_format="wav"
    )
    return base64.b64encode(wav.content).decode()


@pytest.mark.parametrize("face", ["http", "in-process"])
def test_audio_in_a_message_reaches_the_model_as_its_transcript(
    listening: Faces, inprocess_client: Any, face: str
) -> None:
    audio = {"type": "input_audio", "input_audio": {"data": spoken(inprocess_client), "format": "wav"}}
    content = [{"type": "text", "text": "Listen."}, audio]
    answer = listening.face(face).chat.completions.create(
        model="recall", messages=[{"role": "user", "content": content}]
    )
    said = str(answer.choices[0].message.content)
    assert "<audio transcript>" in said
    assert "library" in said.lower()
    assert "nine" in said.lower() or "9" in said


@pytest.mark.parametrize(
    ("audio", "param"),
    [
        ({"data": "UklGRg==", "format": "flac"}, "messages[0].content[0].input_audio.format"),
        ({"data": "%%%", "format": "wav"}, "messages[0].content[0].input_audio.data"),
        ({"data": "", "format": "wav"}, "messages[0].content[0].input_audio.data"),
        ({"data": "AAAA", "format": "wav"}, "messages[0].content[0].input_audio.data"),  # not audio
    ],
)
def test_bad_audio_parts_are_a_400_naming_them(listening: Faces, audio: dict[str, str], param: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        listening.http.chat.completions.create(
            model="recall",
            messages=[{"role": "user", "content": [{"type": "input_audio", "input_audio": audio}]}],
        )
    assert refused.value.body["param"] == param
