"""The predictor contract: good predictors are accepted with their options; bad ones get a clear error."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

import numpy as np
import pytest

from modelport import Capability, Parameter, check_predictor
from modelport.errors import PredictorContractError
from tests.predictors import tiny_models


@pytest.mark.parametrize(
    ("fn", "capability"),
    [
        (tiny_models.trigram_embed, Capability.EMBEDDING),
        (tiny_models.matryoshka_embed, Capability.EMBEDDING),
        (tiny_models.tone_speech, Capability.SPEECH),
        (tiny_models.loudness_transcriber, Capability.TRANSCRIPTION),
        (tiny_models.reverse_chat, Capability.CHAT),
        (tiny_models.count_chat, Capability.CHAT),
    ],
)
def test_capability_is_inferred_from_the_signature(fn: Callable[..., Any], capability: Capability) -> None:
    assert check_predictor(fn).capability is capability


def test_speech_voices_come_from_the_enum_and_rate_from_the_return() -> None:
    predictor = check_predictor(tiny_models.tone_speech)
    assert predictor.voices == ("low", "high")
    assert predictor.sample_rate == 8000
    assert predictor.accepts("openai.audio.speech.speed")


def test_options_are_recorded_by_denotation() -> None:
    assert check_predictor(tiny_models.matryoshka_embed).options == {"openai.embeddings.dims": "dims"}
    assert check_predictor(tiny_models.reverse_chat).options == {
        "openai.chat.completions.max_output_tokens": "max_tokens"
    }


def test_bare_and_called_annotations_are_the_same() -> None:
    def bare(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
        raise NotImplementedError

    def called(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding(description="vectors")]:
        raise NotImplementedError

    assert check_predictor(bare).capability is check_predictor(called).capability is Capability.EMBEDDING


def test_literal_voices() -> None:
    def speak(
        text: str, voice: Annotated[Literal["ann", "bob"], Parameter.AudioVoice]
    ) -> Annotated[np.ndarray, Parameter.Audio(sample_rate=16000)]:
        raise NotImplementedError

    assert check_predictor(speak).voices == ("ann", "bob")


def _embed_two_inputs(texts: list[str], more: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
    raise NotImplementedError


def _embed_wrong_input(texts: list[int]) -> Annotated[np.ndarray, Parameter.Embedding]:
    raise NotImplementedError


def _embed_dims_float(
    texts: list[str], dims: Annotated[float, Parameter.EmbeddingDims] = 1.0
) -> Annotated[np.ndarray, Parameter.Embedding]:
    raise NotImplementedError


def _speech_voice_str(
    text: str, voice: Annotated[str, Parameter.AudioVoice]
) -> Annotated[np.ndarray, Parameter.Audio(sample_rate=16000)]:
    raise NotImplementedError


def _speech_no_voice(text: str, other: str) -> Annotated[np.ndarray, Parameter.Audio(sample_rate=16000)]:
    raise NotImplementedError


def _audio_without_rate(audio: Annotated[np.ndarray, Parameter.Audio]) -> str:
    raise NotImplementedError


def _chat_with_foreign_option(
    messages: list[dict[str, Any]], voice: Annotated[str | None, Parameter.AudioVoice] = None
) -> Iterator[dict[str, Any]]:
    raise NotImplementedError


def _chat_two_required(messages: list[dict[str, Any]], temperature: float) -> Iterator[dict[str, Any]]:
    raise NotImplementedError


def _variadic(*texts: str) -> str:
    raise NotImplementedError


def _unknowable(x: int) -> int:
    raise NotImplementedError


@pytest.mark.parametrize(
    ("fn", "capability", "names"),
    [
        (_embed_two_inputs, None, "exactly one required parameter"),
        (_embed_wrong_input, None, "parameter `texts` must be `list[str]`"),
        (_embed_dims_float, None, "parameter `dims` must be `int`"),
        (_speech_voice_str, None, "parameter `voice` must be a `Literal[...]`"),
        (_speech_no_voice, None, "annotated `Parameter.AudioVoice`"),
        (_audio_without_rate, None, "`Parameter.Audio` without its required arguments"),
        (_chat_with_foreign_option, None, "parameter `voice` is annotated `openai.audio.speech.voice`"),
        (_chat_two_required, None, "cannot tell which capability"),
        (_chat_two_required, "chat", "exactly one required parameter"),
        (_variadic, None, "parameter `texts` is variadic"),
        (_unknowable, None, "cannot tell which capability"),
    ],
)
def test_contract_errors_name_the_function_and_the_problem(
    fn: Callable[..., Any], capability: str | None, names: str
) -> None:
    with pytest.raises(PredictorContractError) as caught:
        check_predictor(fn, capability)
    message = str(caught.value)
    assert f"`tests.predictors.test_contract.{fn.__name__}`" in message
    assert re.search(re.escape(names), message), message


def test_a_completion_prompt_may_take_token_ids_too() -> None:
    def text_only(prompt: str) -> Iterator[dict[str, Any]]:
        raise NotImplementedError

    def ids_too(prompt: str | list[int]) -> Iterator[dict[str, Any]]:
        raise NotImplementedError

    def ids_only(prompt: list[int]) -> Iterator[dict[str, Any]]:
        raise NotImplementedError

    assert not check_predictor(text_only).token_prompts
    assert check_predictor(ids_too).capability is Capability.COMPLETION
    assert check_predictor(ids_too).token_prompts
    with pytest.raises(PredictorContractError, match=re.escape("`str | list[int]` to take token ids too")):
        check_predictor(ids_only, Capability.COMPLETION)
