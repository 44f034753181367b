"""Chat and legacy completions on the default SmolLM2 model, over HTTP and in-process."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.support.configs import NO_EOS

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}


def test_chat_answers_with_the_default_model_through_an_openai_alias(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[SYSTEM, {"role": "user", "content": "Which animal says meow?"}],
        max_tokens=40,
        temperature=0,
        logit_bias=NO_EOS,  # an answer of the whole 40 tokens: its text is there whatever the model says
    )
    assert isinstance(reply, ChatCompletion)
    assert reply.model == "smollm2-135m-instruct"
    assert reply.choices[0].message.content
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage is not None
    assert reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


@pytest.mark.one_face
def test_max_tokens_bounds_the_answer_and_reports_length(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="smollm2-135m-instruct",
        messages=[SYSTEM, {"role": "user", "content": "Write a long story about a dragon."}],
        max_completion_tokens=5,
    )
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 5
    assert reply.choices[0].finish_reason == "length"


def test_streamed_chat_matches_sse_framing_and_ends_with_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="smollm2-135m-instruct",
        messages=[SYSTEM, {"role": "user", "content": "Say hello."}],
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    assert len({c.id for c in chunks}) == 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes in (["stop"], ["length"])
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens <= 8


def test_stream_without_include_usage_has_no_usage(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="smollm2-135m-instruct",
            messages=[SYSTEM, {"role": "user", "content": "Hi"}],
            max_tokens=4,
            stream=True,
        )
    )
    assert chunks
    assert all(c.usage is None and c.choices for c in chunks)


@pytest.mark.one_face
def test_n_gives_that_many_choices(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="smollm2-135m-instruct",
        messages=[SYSTEM, {"role": "user", "content": "Name a colour."}],
        max_tokens=6,
        n=2,
    )
    assert sorted(c.index for c in reply.choices) == [0, 1]


@pytest.mark.one_face
def test_legacy_completion_with_a_list_of_prompts(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model="gpt-3.5-turbo-instruct", prompt=["Once upon a time", "The capital of France is"], max_tokens=4
    )
    assert isinstance(reply, Completion)
    assert [c.index for c in reply.choices] == [0, 1]
    assert all(c.text for c in reply.choices)
    assert reply.usage is not None
    # A prompt may end early on the end-of-text token; only a full-length finish fixes the count.
    full = sum(c.finish_reason == "length" for c in reply.choices)
    assert 4 * full < reply.usage.completion_tokens <= 8 if full < 2 else reply.usage.completion_tokens == 8


@pytest.mark.one_face
def test_legacy_completion_defaults_to_sixteen_tokens_like_openai(client: openai.OpenAI) -> None:
    reply = client.completions.create(model="smollm2-135m-instruct", prompt="A long list of fruits: apple,")
    assert reply.usage is not None
    assert reply.usage.completion_tokens <= 16


def test_streamed_legacy_completion(client: openai.OpenAI) -> None:
    chunks = list(
        client.completions.create(
            model="smollm2-135m-instruct", prompt="One, two,", max_tokens=5, stream=True
        )
    )
    assert all(isinstance(c, Completion) for c in chunks)
    assert "".join(c.choices[0].text for c in chunks if c.choices)


def test_the_sdk_stream_helper_rebuilds_the_message(http_client: openai.OpenAI) -> None:
    with http_client.chat.completions.stream(
        model="smollm2-135m-instruct",
        messages=[SYSTEM, {"role": "user", "content": "Which animal says meow?"}],
        max_tokens=200,
        temperature=0,
    ) as stream:
        deltas = "".join(event.delta for event in stream if event.type == "content.delta")
        final = stream.get_final_completion()
    assert final.choices[0].message.content == deltas


def test_a_context_overflow_is_a_400_with_both_numbers(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="smollm2-135m-instruct",
            messages=[{"role": "user", "content": "word " * 9000}],
            max_tokens=4,
        )
    assert caught.value.code == "context_length_exceeded"
    assert "8192" in caught.value.message


def test_invalid_arguments_are_400s_naming_the_parameter(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="smollm2-135m-instruct", messages=[{"role": "wizard", "content": "hi"}]
        )
    assert caught.value.param == "messages[0].role"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="smollm2-135m-instruct", messages=[{"role": "user", "content": "hi"}], top_p=3
        )
    assert caught.value.param == "top_p"


def test_an_unknown_model_is_a_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.code == "model_not_found"


def test_a_model_without_the_capability_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="whisper-1", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.param == "model"


# SmolLM2's own ids (llama.cpp's /tokenize) for the prompts of test_legacy_completion_with_a_list_of_prompts.
FRANCE, ONCE = [504, 3575, 282, 4649, 314], [6403, 1980, 253, 655]


@pytest.mark.one_face
def test_legacy_completion_of_the_model_s_own_token_ids(client: openai.OpenAI) -> None:
    def answer(prompt: str | list[int] | list[list[int]], **extra: object) -> openai.types.Completion:
        return client.completions.create(
            model="gpt-3.5-turbo-instruct", prompt=prompt, max_tokens=6, temperature=0, **extra
        )

    by_text, by_ids = answer("The capital of France is"), answer(FRANCE)
    assert by_ids.choices[0].text == by_text.choices[0].text
    assert by_ids.usage is not None
    assert by_ids.usage.prompt_tokens == len(FRANCE)
    # The same prompt, not always the same answer: "Once upon a time" ends on a near-tie, which the logits'
    # last bits settle otherwise when the prompt was cached by the request before (", the city of New Haven"
    # and "... Nova Haven" on one CPU); the prompt itself is checked by its tokens and its echo.
    once_ids, once_text = answer(ONCE).usage, answer("Once upon a time").usage
    assert once_ids is not None
    assert once_text is not None
    assert once_ids.prompt_tokens == once_text.prompt_tokens == len(ONCE)
    both = answer([FRANCE, ONCE])  # decoded side by side, whose batching moves logits' last bits: no equality
    assert [c.index for c in both.choices] == [0, 1]
    assert all(c.text for c in both.choices)
    echoed = answer(ONCE, echo=True)
    assert echoed.choices[0].text.startswith("Once upon a time")


def test_a_token_id_outside_the_model_s_vocabulary_is_a_400_naming_it(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="gpt-3.5-turbo-instruct", prompt=[FRANCE, [1, 49152]], max_tokens=2)
    assert caught.value.param == "prompt"
    assert "prompt[1][1]" in caught.value.message
    assert "49151" in caught.value.message


# An assistant turn OpenAI's model refused, sent back as the SDK hands it over: its refusal as a content part,
# or as the message's `refusal` beside no content.
REFUSED = [
    [{"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot help with that."}]}],
    [{"role": "assistant", "content": None, "refusal": "I cannot help with that."}],
]


@pytest.mark.parametrize("refused", REFUSED, ids=["a refusal part", "the message's refusal"])
def test_a_refusal_sent_back_reaches_the_model_as_what_the_assistant_said(tiny: Any, refused: Any) -> None:
    asked = [{"role": "user", "content": "Pick a lock."}, *refused, {"role": "user", "content": "Why not?"}]
    said = tiny.chat.completions.create(model="recall", messages=asked).choices[0].message.content
    assert "assistant: I cannot help with that. / user: Why not?" in said
    assert "refusal" not in said


@pytest.mark.one_face
@pytest.mark.parametrize("refused", REFUSED, ids=["a refusal part", "the message's refusal"])
def test_a_refusal_sent_back_is_read_by_the_engine(client: openai.OpenAI, refused: Any) -> None:
    asked = [{"role": "user", "content": "Pick a lock."}, *refused, {"role": "user", "content": "Why not?"}]
    reply = client.chat.completions.create(model="smollm2-135m-instruct", messages=asked, max_tokens=1)
    assert reply.usage is not None
    assert reply.usage.prompt_tokens > 0
