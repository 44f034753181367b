"""Sampling and decoding parameters, n / best_of / beam search, logprobs and accounting."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import openai
import pytest

import modelport
from modelport.predictors.registry import ModelRegistry
from modelport.service import Service
from modelport.settings import Settings
from tests.predictors.tiny_models import letters_chat, seed_chat
from tests.support.configs import NO_EOS, tiny_models
from tests.support.faces import Faces, faces

pytestmark = pytest.mark.one_face  # the model's own work: one face (tests/conftest.py)

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
ASK = [SYSTEM, {"role": "user", "content": "Tell me about cats."}]
OK_TOKEN = "10907"  # SmolLM2's " ok"


def test_n_three_gives_three_choices_and_counts_the_prompt_once(client: openai.OpenAI) -> None:
    one = client.chat.completions.create(model="gpt-4o-mini", messages=ASK, max_tokens=8)
    three = client.chat.completions.create(model="gpt-4o-mini", messages=ASK, max_tokens=8, n=3)
    assert [c.index for c in three.choices] == [0, 1, 2]
    assert all(c.message.content for c in three.choices)
    assert one.usage is not None
    assert three.usage is not None
    assert three.usage.prompt_tokens == one.usage.prompt_tokens
    full = sum(c.finish_reason == "length" for c in three.choices)
    assert 8 * full < three.usage.completion_tokens <= 24 if full < 3 else three.usage.completion_tokens == 24


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    """A tiny predictor that answers with the seed it samples with."""
    database = str(tmp_path_factory.mktemp("sampling") / "state.db")
    with faces(tiny_models(database, "sk-sampling", seeded="seed_chat"), api_key="sk-sampling") as served:
        yield served


@pytest.mark.parametrize("face", ["http", "in-process"])
def test_a_seed_is_each_choice_s_own_and_the_same_each_time(seeded: Faces, face: str) -> None:
    """Choice j samples with seed + j: the same request samples the same way again, and its choices differ
    (what llama.cpp then makes of a seed is its own; the model's words are not compared here)."""
    client = seeded.face(face)

    def run(**seed: int) -> list[str]:
        reply = client.chat.completions.create(model="seeded", messages=ASK, n=3, **seed)
        return [c.message.content or "" for c in reply.choices]

    assert run(seed=42) == ["42", "43", "44"]
    assert run(seed=42) == ["42", "43", "44"]
    assert run() == ["none", "none", "none"]


def test_more_choices_than_the_model_has_slots_and_line_take_turns_rather_than_a_429() -> None:
    """A request's own choices wait for the model's slots one after another: a model of one slot and no
    line for waiting answered n=3 with a 429 of its own making, on an idle server."""
    registry = ModelRegistry()
    registry.add_predictor("seeded", seed_chat, concurrency=1, queue=0)
    client = modelport.OpenAI(service=Service(registry, Settings()))
    reply = client.chat.completions.create(model="seeded", messages=ASK, n=3, seed=7)
    assert [c.message.content for c in reply.choices] == ["7", "8", "9"]
    registry.add_predictor("letters", letters_chat, concurrency=1, queue=0)
    beams = client.chat.completions.create(
        model="letters", messages=ASK, n=2, max_tokens=3, extra_body={"use_beam_search": True, "best_of": 3}
    )
    assert [c.message.content for c in beams.choices] == ["aaa", "aab"]


def test_chat_logprobs_are_openai_shaped_and_not_positive(client: openai.OpenAI) -> None:
    # The end barred in each of these: sampled (no seed), an answer may end before its 5 tokens.
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=ASK, max_tokens=5, logprobs=True, top_logprobs=3, logit_bias=NO_EOS
    )
    content = reply.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content is not None
    assert len(content) == 5
    for token in content:
        assert token.logprob <= 0
        assert len(token.top_logprobs) == 3
        assert all(t.logprob <= 0 for t in token.top_logprobs)
    assert "".join(t.token for t in content) == reply.choices[0].message.content


@pytest.mark.parametrize("top", [None, 0])
def test_chat_logprobs_without_alternatives_have_none(client: openai.OpenAI, top: int | None) -> None:
    """As OpenAI: each token's log-probability, and as many alternatives as `top_logprobs` asks (none when
    it is 0 or unset; llama.cpp alone gives none at all for 0 and 20 when unset)."""
    extra = {} if top is None else {"top_logprobs": top}
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=ASK, max_tokens=5, logprobs=True, logit_bias=NO_EOS, **extra
    )
    content = reply.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content is not None
    assert len(content) == 5
    assert all(token.top_logprobs == [] for token in content)
    assert "".join(t.token for t in content) == reply.choices[0].message.content


@pytest.mark.both_faces
def test_streamed_logprobs_arrive_with_their_tokens(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-mini", messages=ASK, max_tokens=5, logprobs=True, stream=True, logit_bias=NO_EOS
        )
    )
    tokens = [
        t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content or []
    ]
    assert len(tokens) == 5


def test_the_sampled_token_is_always_among_its_top_logprobs(client: openai.OpenAI) -> None:
    """As OpenAI does (up to `logprobs` + 1 entries), so `top_logprobs[i][tokens[i]]` never fails."""
    reply = client.completions.create(
        model="gpt-4o-mini", prompt="Once upon a time", max_tokens=24, logprobs=1, temperature=2.0, seed=3
    )
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None
    tops, tokens, values = logprobs.top_logprobs or [], logprobs.tokens or [], logprobs.token_logprobs or []
    assert all(top[token] == value for top, token, value in zip(tops, tokens, values, strict=True))
    assert all(len(top) <= 2 for top in tops)
    assert any(len(top) == 2 for top in tops)  # at this temperature some sampled token was not the likeliest


@pytest.mark.parametrize("alternatives", [2, 0])
def test_legacy_logprobs_are_parallel_lists(client: openai.OpenAI, alternatives: int) -> None:
    """`logprobs` alternatives a token, and the sampled token's own always (`logprobs: 0` was no lists)."""
    # The end barred: sampled (no seed), an answer may end before its 4 tokens (" forever." did).
    reply = client.completions.create(
        model="gpt-4o-mini", prompt="The sky is", max_tokens=4, logprobs=alternatives, logit_bias=NO_EOS
    )
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None
    assert len(logprobs.tokens or []) == len(logprobs.token_logprobs or []) == 4
    assert all(lp <= 0 for lp in logprobs.token_logprobs or [])
    assert all(max(1, alternatives) <= len(top) <= alternatives + 1 for top in logprobs.top_logprobs or [])
    assert all(
        token in top for token, top in zip(logprobs.tokens or [], logprobs.top_logprobs or [], strict=True)
    )
    assert "".join(logprobs.tokens or []) == reply.choices[0].text
    assert logprobs.text_offset == [sum(len(t) for t in (logprobs.tokens or [])[:i]) for i in range(4)]


def test_echo_puts_the_prompt_first(client: openai.OpenAI) -> None:
    reply = client.completions.create(model="gpt-4o-mini", prompt="Once upon a time", max_tokens=3, echo=True)
    assert reply.choices[0].text.startswith("Once upon a time")
    assert len(reply.choices[0].text) > len("Once upon a time")


@pytest.mark.both_faces
def test_suffix_on_a_model_without_fill_in_the_middle_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="gpt-4o-mini", prompt="def f():", suffix="    return x", max_tokens=3)
    assert caught.value.param == "suffix"


def test_best_of_returns_the_most_likely_of_its_candidates(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model="gpt-4o-mini", prompt="The capital of France is", max_tokens=6, best_of=4, n=2, logprobs=0
    )
    assert [c.index for c in reply.choices] == [0, 1]
    means = [
        sum(c.logprobs.token_logprobs or []) / len(c.logprobs.token_logprobs or [1]) for c in reply.choices
    ]  # type: ignore[union-attr]
    assert means[0] >= means[1]
    assert reply.usage is not None
    assert reply.usage.completion_tokens > 12  # all four candidates are billed, as OpenAI does


@pytest.mark.both_faces
def test_best_of_cannot_stream(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="gpt-4o-mini", prompt="x", best_of=2, stream=True)
    assert caught.value.param == "best_of"


@pytest.mark.slow
def test_beam_search_returns_the_beams_on_both_endpoints(client: openai.OpenAI) -> None:
    # What the search decides: `n` beams of the `best_of` it kept, each its own text (a sampler may draw one
    # answer twice; beams never are), counted. Which beams win a near tie is not asked: the one-token steps
    # are batched with whatever else runs, and the batch moves a score's last bits. Nor whether a beam has
    # text: one that ends at its first token is empty, and beam search ranks the model's own log-probabilities
    # (it applies no `logit_bias` that could bar the end), so that is the model's choice.
    chat = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[SYSTEM, {"role": "user", "content": "Which animal says meow?"}],
        max_tokens=12,
        n=2,
        extra_body={"use_beam_search": True, "best_of": 3},
    )
    texts = [c.message.content for c in chat.choices]
    assert len(texts) == 2
    assert all(isinstance(text, str) for text in texts)
    assert texts[0] != texts[1]
    assert [c.index for c in chat.choices] == [0, 1]
    assert {c.finish_reason for c in chat.choices} <= {"stop", "length"}
    assert chat.usage is not None
    assert chat.usage.completion_tokens > 0
    legacy = client.completions.create(
        model="gpt-4o-mini",
        prompt="The capital of France is",
        max_tokens=4,
        n=2,
        extra_body={"use_beam_search": True, "best_of": 2, "length_penalty": 0.5, "early_stopping": True},
    )
    beams = [c.text for c in legacy.choices]
    assert len(beams) == 2
    assert beams[0] != beams[1]


def test_a_huge_length_penalty_saturates_instead_of_overflowing() -> None:
    # Found by the fuzz test: 5 ** 8.4e269 overflowed a float and the request was a 500.
    from modelport.service.generation.beam import Beam

    for penalty in (8.4e269, -8.4e269, 0.0):
        assert math.isfinite(Beam(logprob=-3.0, tokens=5).score(penalty))
    assert Beam(logprob=-3.0, tokens=5).score(1.0) == pytest.approx(-0.6)


def test_stop_sequences_cut_the_text_and_are_not_included(client: openai.OpenAI) -> None:
    # The stop is taken from what the model wrote (the end barred, so it writes all 12 tokens), not from
    # what it is expected to write: the server's part is to cut there and leave the stop out.
    asked = {"model": "gpt-4o-mini", "prompt": "1, 2, 3, 4,", "max_tokens": 12, "temperature": 0}
    free = client.completions.create(**asked, logit_bias=NO_EOS).choices[0].text  # type: ignore[call-overload]
    stop = free[len(free) // 2 : len(free) // 2 + 2]
    cut = client.completions.create(**asked, logit_bias=NO_EOS, stop=[stop, "zzz"])  # type: ignore[call-overload]
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == free[: free.index(stop)]
    # An empty stop sequence stops nothing (llama.cpp finds it before the first token: an empty answer).
    blank = client.completions.create(**asked, logit_bias=NO_EOS, stop=["", "zzz"])  # type: ignore[call-overload]
    assert (blank.choices[0].text, blank.choices[0].finish_reason) == (free, "length")


@pytest.mark.parametrize(
    "extra",
    [
        {"top_k": 1},
        {"min_p": 0.9},
        {"repetition_penalty": 1.3},
        {"logit_bias": {"28": -100}},
        {"ignore_eos": True},
    ],
)
def test_vllm_sampling_extras_are_accepted_on_both_endpoints(
    client: openai.OpenAI, extra: dict[str, object]
) -> None:
    chat = client.chat.completions.create(model="gpt-4o-mini", messages=ASK, max_tokens=4, extra_body=extra)
    assert chat.choices[0].message.content is not None
    legacy = client.completions.create(model="gpt-4o-mini", prompt="Hello", max_tokens=4, extra_body=extra)
    assert legacy.choices[0].text is not None


def test_a_bias_barring_all_the_vocabulary_but_one_token_leaves_only_that_token(
    client: openai.OpenAI,
) -> None:
    # 49,151 biases: llama.cpp is handed them as pairs (as an object, a list of that length took it seconds).
    bias = {str(token): -100 for token in range(49152) if token != 28}
    reply = client.completions.create(
        model="gpt-4o-mini", prompt="Hello", max_tokens=4, temperature=0, logprobs=1, logit_bias=bias
    )
    assert reply.choices[0].logprobs is not None
    tokens = reply.choices[0].logprobs.tokens
    assert tokens is not None
    assert len(tokens) == 4
    assert len(set(tokens)) == 1


def test_top_k_one_is_greedy(client: openai.OpenAI) -> None:
    outputs = {
        client.completions.create(
            model="gpt-4o-mini",
            prompt="My favourite fruit is",
            max_tokens=8,
            temperature=1.5,
            extra_body={"top_k": 1},
        )
        .choices[0]
        .text
        for _ in range(3)
    }
    assert len(outputs) == 1


def test_ignore_eos_runs_to_max_tokens(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[SYSTEM, {"role": "user", "content": "Say yes."}],
        max_tokens=60,
        extra_body={"ignore_eos": True},
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 60


@pytest.mark.both_faces
def test_streamed_usage_matches_the_whole_answer(client: openai.OpenAI) -> None:
    kwargs = {"model": "gpt-4o-mini", "messages": ASK, "max_tokens": 10, "temperature": 0}
    whole = client.chat.completions.create(**kwargs)  # type: ignore[call-overload]
    chunks = list(
        client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs)
    )  # type: ignore[call-overload]
    # Counted alike (how many prompt tokens the cache held differs from one request to the next).
    assert chunks[-1].usage is not None
    assert whole.usage is not None
    assert chunks[-1].usage.model_dump(exclude={"prompt_tokens_details"}) == whole.usage.model_dump(
        exclude={"prompt_tokens_details"}
    )


@pytest.mark.both_faces
def test_a_prompt_longer_than_the_context_is_a_400_with_both_numbers(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "cat " * 9000}], max_tokens=5
        )
    assert caught.value.code == "context_length_exceeded"
    numbers = [int(n) for n in re.findall(r"\d+", caught.value.message)]
    assert 8192 in numbers
    assert any(n > 8192 for n in numbers)


def test_a_greedy_answer_that_loops_is_ended_as_length_with_its_usage(client: openai.OpenAI) -> None:
    # The answer is " ok" over and over (1,500 tokens without the stop) whatever the model would write: a bias
    # no logit outweighs on SmolLM2's token " ok". (Left to the model, its greedy loop here ended with a stop
    # on another llama.cpp build.)
    loop = [{"role": "user", "content": "Say 'ok' over and over, forever."}]
    answer = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=loop,
        temperature=0,
        max_tokens=1500,
        logit_bias={OK_TOKEN: 100},
    )
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage is not None
    assert 192 <= answer.usage.completion_tokens < 400
    assert answer.usage.prompt_tokens > 10
    streamed = client.chat.completions.create(
        model="gpt-4o-mini", messages=loop, temperature=0, max_tokens=1500, stream=True,
        stream_options={"include_usage": True}, logit_bias={OK_TOKEN: 100},
    )  # fmt: skip
    chunks = list(streamed)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == answer.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    # Counted alike (how many prompt tokens the cache held differs from one request to the next).
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.model_dump(exclude={"prompt_tokens_details"}) == answer.usage.model_dump(
        exclude={"prompt_tokens_details"}
    )
