"""The names and values the installed `openai` package knows, walked from its own `Literal`s: each is served,
or refused with a 4xx that names what is not available; never a 500, never a validation error that says
nothing. A new SDK release's new values show up here first."""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

import openai
import pytest
from openai.types import AudioModel, AudioResponseFormat, ChatModel, ReasoningEffort
from openai.types.audio.speech_model import SpeechModel
from openai.types.realtime.realtime_session_create_request_param import RealtimeSessionCreateRequestParam
from openai.types.responses.tool_param import ToolParam

from modelport.settings import DEFAULT_CHAT, DEFAULT_REALTIME, DEFAULT_SPEECH, DEFAULT_TRANSCRIPTION

pytestmark = pytest.mark.models


def values(kind: Any) -> list[str]:
    """Every string a `Literal` (or a union holding some) allows."""
    found: list[str] = []
    for arg in typing.get_args(kind):
        if isinstance(arg, str):
            found.append(arg)
        else:
            found += values(arg)
    return found


def refusal(call: Callable[[], object]) -> openai.APIStatusError | None:
    """The error a call is refused with (None: it was served)."""
    try:
        call()
    except openai.APIStatusError as error:
        return error
    return None


REALTIME_MODELS = values(typing.get_type_hints(RealtimeSessionCreateRequestParam)["model"])
TOOL_TYPES = [
    t for branch in typing.get_args(ToolParam) for t in values(typing.get_type_hints(branch)["type"])
]


@pytest.mark.parametrize(
    ("names", "served"),
    [
        (values(ChatModel), DEFAULT_CHAT),
        (values(AudioModel), DEFAULT_TRANSCRIPTION),
        (values(SpeechModel), DEFAULT_SPEECH),
        ([name for name in REALTIME_MODELS if "realtime" in name], DEFAULT_REALTIME),
    ],
    # The realtime session's models include chat models with audio (`gpt-audio-1.5`): walked as ChatModel.
    ids=["ChatModel", "AudioModel", "SpeechModel", "RealtimeModel"],
)
def test_every_openai_model_name_retrieves_the_model_it_reaches_or_is_a_404(
    http_client: openai.OpenAI, names: list[str], served: str
) -> None:
    refused = []
    for name in names:
        error = refusal(lambda: http_client.models.retrieve(name))  # noqa: B023
        if error is None:
            assert http_client.models.retrieve(name).id == served, name
            continue
        assert isinstance(error, openai.NotFoundError), (name, error)
        assert error.code == "model_not_found"
        assert name in error.message
        refused.append(name)
    # Only OpenAI's image models are not chat models here (they are in ChatModel's list for the Responses
    # API's image generation).
    assert all("image" in name for name in refused), refused


def test_every_reasoning_effort_is_taken_on_chat_and_responses(http_client: openai.OpenAI) -> None:
    for effort in values(ReasoningEffort):
        http_client.chat.completions.create(
            model="gpt-5",
            messages=[{"role": "user", "content": "hi"}],
            reasoning_effort=effort,
            max_tokens=2,  # type: ignore[arg-type]
        )
        made = http_client.responses.create(
            model="gpt-5",
            input="hi",
            reasoning={"effort": effort},
            max_output_tokens=16,  # type: ignore[typeddict-item]
        )
        assert made.reasoning is not None
        assert made.reasoning.effort == effort


def test_every_transcription_format_is_served_or_refused_by_name(
    http_client: openai.OpenAI, inprocess_client: openai.OpenAI
) -> None:
    wav = inprocess_client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello.", response_format="wav"
    )
    for form in values(AudioResponseFormat):
        error = refusal(
            lambda: http_client.audio.transcriptions.create(
                model="whisper-1",
                file=("hi.wav", wav.content),
                response_format=form,  # type: ignore[call-overload]  # noqa: B023
            )
        )
        if error is not None:
            assert isinstance(error, openai.BadRequestError), (form, error)
            assert error.param == "response_format", form
            assert form in error.message


@pytest.mark.parametrize("kind", TOOL_TYPES)
def test_every_responses_tool_type_is_taken_or_refused_naming_it(
    http_client: openai.OpenAI, kind: str
) -> None:
    error = refusal(
        lambda: http_client.responses.create(
            model="gpt-5",
            input="hi",
            tools=[{"type": kind, "name": "t"}],
            max_output_tokens=16,  # type: ignore[list-item]
        )
    )
    if error is not None:
        assert isinstance(error, openai.BadRequestError), (kind, error)
        assert (error.param or "").startswith("tools[0]"), (kind, error.message)
