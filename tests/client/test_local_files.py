"""The in-process client reads the files that `file://` URLs in content parts name (the caller's own
machine): chat `file` parts, Responses `input_file` and `input_image` parts. `recall` answers with what it
was given, so what reached the model is known. (Images by path: `tests/server/test_vision.py`.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

import modelport
from modelport.settings import Limits, ModelConfig, Settings

NOTE = "The staff room key hangs behind the second door."


@pytest.fixture(scope="module")
def sdk() -> Iterator[modelport.OpenAI]:
    models = [ModelConfig(id="recall", predictor="tests.predictors.tiny_models:recall_chat")]
    settings = Settings(defaults=False, models=models, limits=Limits(fetch_bytes=1000))
    with modelport.OpenAI(settings=settings) as opened:
        yield opened


@pytest.fixture
def note(tmp_path: Path) -> Path:
    path = tmp_path / "note.txt"
    path.write_text(NOTE)
    return path


def test_a_chat_file_part_by_path(sdk: modelport.OpenAI, note: Path) -> None:
    part = {"type": "file", "file": {"file_url": note.as_uri()}}
    answer = sdk.chat.completions.create(
        model="recall",
        messages=[{"role": "user", "content": [part]}],  # type: ignore[list-item]
    )
    said = str(answer.choices[0].message.content)
    assert "<file name='note.txt'>" in said
    assert NOTE in said


def test_a_responses_input_file_by_path(sdk: modelport.OpenAI, note: Path) -> None:
    part = {"type": "input_file", "file_url": note.as_uri()}
    answer = sdk.responses.create(
        model="recall",
        input=[{"role": "user", "content": [part]}],
        store=False,  # type: ignore[list-item]
    )
    assert NOTE in answer.output_text


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [("missing.txt", None, "cannot be read"), ("big.txt", "x" * 1001, "larger than 1000 bytes")],
)
def test_a_path_that_cannot_be_sent_is_a_400_naming_the_part(
    sdk: modelport.OpenAI, tmp_path: Path, name: str, content: str | None, words: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    part = {"type": "file", "file": {"file_url": path.as_uri()}}
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.chat.completions.create(model="recall", messages=[{"role": "user", "content": [part]}])  # type: ignore[list-item]
    assert words in str(refused.value)
    assert refused.value.body["param"] == "messages[0].content[0].file.file_url"  # type: ignore[index]


def test_a_file_url_of_another_host_is_refused(sdk: modelport.OpenAI) -> None:
    part = {"type": "input_image", "image_url": "file://elsewhere/etc/passwd"}
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.responses.create(model="recall", input=[{"role": "user", "content": [part]}])  # type: ignore[list-item]
    assert refused.value.body["param"] == "input[0].content[0].image_url"  # type: ignore[index]
