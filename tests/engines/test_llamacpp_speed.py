"""What speculative decoding does to the llama.cpp engine's answers, and what it must not change: a model
speculates when asked and counts what its drafts paid, a greedy copy stays the same with n-grams or a
draft model, log-probabilities and constrained answers stay exact, and an unknown speculator or a missing
draft model is named."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from prometheus_client import REGISTRY

import modelport
from modelport.engines import llamacpp
from modelport.engines.llamacpp import cpu_builds, xllamacpp_loader
from modelport.settings import ModelConfig, Settings
from tests.support.configs import NO_EOS

pytestmark = pytest.mark.models  # real models: not the unit tier

CODE = "\n".join(f"def f{i}(x):\n    return x * {i} + {i * i}" for i in range(20))
COPY = [{"role": "user", "content": f"Return this code unchanged:\n\n{CODE}"}]


def client(**options: Any) -> modelport.OpenAI:
    model = ModelConfig(id="m", engine="llamacpp", **options)
    settings = Settings(defaults=False, models=[model], store={"url": "none"})  # type: ignore[arg-type]
    return modelport.OpenAI(settings=settings)


def greedy_copies(options: dict[str, Any], times: int, max_tokens: int) -> list[str | None]:
    """The answers to asking a one-slot model for the same copy `times` times in turn."""
    return greedy_answers(options, [COPY] * times, max_tokens)


def greedy_answers(options: dict[str, Any], asked: list[Any], max_tokens: int) -> list[str | None]:
    """A one-slot model's greedy answers to these conversations, in turn."""
    with client(n_parallel=1, **options) as model:
        return [
            model.chat.completions.create(model="m", messages=messages, max_tokens=max_tokens, temperature=0)
            .choices[0]
            .message.content
            for messages in asked
        ]


def drafts() -> tuple[float, float]:
    """Tokens the default model's drafts have held so far in this process, and how many were accepted."""
    labels = {"gguf": llamacpp.default_gguf().name}
    drafted = REGISTRY.get_sample_value("modelport_drafted_tokens_total", labels) or 0.0
    return drafted, REGISTRY.get_sample_value("modelport_draft_accepted_tokens_total", labels) or 0.0


@pytest.fixture(scope="module")
def speculating() -> Iterator[modelport.OpenAI]:
    """A model asked to speculate with n-grams (on by default only in this CPU's build) that has copied the
    code twice."""
    with client(n_parallel=3, speculative="ngram-map-k") as speculating:
        for _ in range(2):
            speculating.chat.completions.create(model="m", messages=COPY, max_tokens=96, temperature=0)  # type: ignore[arg-type]
        yield speculating


def test_a_model_asked_to_speculate_does_and_a_copy_takes_its_drafts(
    speculating: modelport.OpenAI,
) -> None:
    before = drafts()
    reply = speculating.chat.completions.create(model="m", messages=COPY, max_tokens=96, temperature=0)  # type: ignore[arg-type]
    drafted, accepted = (now - then for now, then in zip(drafts(), before, strict=True))
    assert reply.usage.completion_tokens == 96  # type: ignore[union-attr]
    # The answer copies code from its own prompt: a good part of it comes from drafts the model accepted
    # (about half of the 96 tokens when written; the first tokens of each line are the model's own).
    assert accepted >= 24
    # Counted once each, though llama.cpp reports the request's totals on every chunk it streams.
    assert accepted <= drafted
    assert accepted <= 96


def test_a_slot_drafts_while_few_generate_and_not_beside_many(speculating: modelport.OpenAI) -> None:
    """Alone, a copy takes drafts; three copies at once, where drafts would widen every step of a busy
    machine for nothing, draft less all together than the one alone did (only while the others' prompts
    are still being read)."""
    if cpu_builds.DRAFTING_WHILE_FEW not in xllamacpp_loader.running().source_edits:
        pytest.skip(
            "the llama.cpp running is no build of modelport's with the edit (`modelport engine build`)"
        )

    def copy() -> int:
        reply = speculating.chat.completions.create(model="m", messages=COPY, max_tokens=96, temperature=0)  # type: ignore[arg-type]
        return reply.usage.completion_tokens  # type: ignore[union-attr]

    def drafted(at_once: int) -> float:
        before = drafts()[0]
        with ThreadPoolExecutor(at_once) as pool:
            assert list(pool.map(lambda _: copy(), range(at_once))) == [96] * at_once
        return drafts()[0] - before

    alone = drafted(1)
    assert alone >= 24
    assert drafted(3) < alone


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cache_mib", "edit"),
    [(1024, cpu_builds.NGRAM_MAP_WITH_SLOT), (0, cpu_builds.NGRAM_MAP_WITH_PROMPT)],
    ids=["the conversation cache", "llama.cpp's own placement"],
)
def test_a_turn_in_a_slot_that_held_another_drafts_from_its_own_prompt(cache_mib: int, edit: str) -> None:
    """A turn goes into a slot that held an unrelated one — one the conversation cache emptied, or, with the
    cache off, one llama.cpp keeps only the common prefix of: the slot's n-gram map starts afresh with it,
    so a copy after an unrelated copy takes the drafts it takes in a slot that never ran (the map kept the
    earlier history's keys: none were taken). The end is barred: what is copied, and so drafted, is then up
    to the server, not where the model stops."""
    if edit not in xllamacpp_loader.running().source_edits:
        pytest.skip(
            "the llama.cpp running is no build of modelport's with the edit (`modelport engine build`)"
        )
    other = "\n".join(f"def g{i}(y):\n    return y - {3 * i} * {i + 7}" for i in range(20))

    def accepted(codes: list[str]) -> float:
        """Drafted tokens the last of these copies took, asked in turn of a one-slot model."""
        options = {"n_parallel": 1, "speculative": "ngram-map-k", "conversation_cache_mib": cache_mib}
        with client(**options) as model:
            for code in codes:
                before = drafts()[1]
                asked = [{"role": "user", "content": f"Return this code unchanged:\n\n{code}"}]
                model.chat.completions.create(
                    model="m", messages=asked, max_tokens=64, temperature=0, logit_bias=NO_EOS,  # type: ignore[arg-type]
                )  # fmt: skip
        return drafts()[1] - before

    alone = accepted([other])
    assert alone >= 24
    assert accepted([CODE, other]) >= alone / 2


def test_every_token_has_its_logprobs_although_the_model_speculates(speculating: modelport.OpenAI) -> None:
    reply = speculating.chat.completions.create(
        model="m",
        messages=COPY,
        max_tokens=64,
        temperature=0,
        logprobs=True,
        top_logprobs=3,  # type: ignore[arg-type]
    )
    tokens = reply.choices[0].logprobs.content  # type: ignore[union-attr]
    assert len(tokens) == reply.usage.completion_tokens  # type: ignore[union-attr]
    # A drafted token would come back with no alternatives and a log-probability of exactly 0.
    assert all(len(t.top_logprobs) == 3 for t in tokens)
    assert any(t.logprob < 0 for t in tokens)
    completion = speculating.completions.create(
        model="m", prompt=CODE, max_tokens=32, temperature=0, logprobs=2
    )
    assert all(len(top) == 2 for top in completion.choices[0].logprobs.top_logprobs)  # type: ignore[union-attr, arg-type]


def test_constrained_answers_hold_to_their_grammar_while_speculating(speculating: modelport.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "lines": {"type": "array", "items": {"type": "string"}}},
        "required": ["name", "lines"],
        "additionalProperties": False,
    }
    ask = [{"role": "user", "content": f"Give the file a name and its lines as JSON:\n\n{CODE}"}]
    for _ in range(2):  # the second answer can be drafted from the first
        reply = speculating.chat.completions.create(
            model="m", messages=ask, max_tokens=300, temperature=0,  # type: ignore[arg-type]
            response_format={"type": "json_schema", "json_schema": {"name": "file", "schema": schema}},
        )  # fmt: skip
        if reply.choices[0].finish_reason == "stop":
            assert set(json.loads(reply.choices[0].message.content or "")) == {"name", "lines"}
        else:  # cut at max_tokens: what there is still follows the grammar as a prefix
            assert (reply.choices[0].message.content or "").startswith('{"name":')


@pytest.mark.slow
def test_ngram_speculation_keeps_greedy_answers_token_for_token() -> None:
    """Drafts are verified by the model: on a copy it is sure of, greedy output is the same with and without
    them (where two tokens are all but equally likely, the verifying batch's last bits can flip it)."""
    plain = greedy_copies({"speculative": "none"}, 1, 96)
    drafted = greedy_copies({"speculative": "ngram-map-k"}, 1, 96)  # drafts from the prompt, the first time
    shared = greedy_copies({"speculative": "ngram-mod"}, 2, 96)  # the second time, drafts are taken
    assert len(set(plain + drafted + shared)) == 1


@pytest.mark.slow
def test_the_default_speculation_keeps_greedy_answers_that_change_what_they_copy_or_copy_nothing() -> None:
    """An edit (drafts of the old name are rejected where the new one goes) and free text (few drafts)."""
    asked = [
        [{"role": "user", "content": f"Return this code with f3 renamed to g3:\n\n{CODE}"}],
        [{"role": "user", "content": "Write a short story about a lighthouse keeper."}],
    ]
    drafted = greedy_answers({"speculative": "ngram-map-k"}, asked, 128)
    assert drafted == greedy_answers({"speculative": "none"}, asked, 128)


@pytest.mark.slow
def test_a_draft_model_keeps_greedy_answers() -> None:
    """SmolLM2 drafting for itself (the one offline pair sharing a vocabulary), on a copy it is sure of."""
    drafted = {"speculative": "none", "draft": str(llamacpp.default_gguf())}
    assert greedy_copies({"speculative": "none"}, 1, 64) == greedy_copies(drafted, 1, 64)


def test_an_unknown_speculation_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="speculative must be none, ngram-mod"):
        llamacpp.start_server(speculative="eagle")


def test_a_missing_draft_model_is_named() -> None:
    with pytest.raises(FileNotFoundError, match=r"draft model file not found: /nowhere\.gguf"):
        llamacpp.start_server(draft="/nowhere.gguf")
