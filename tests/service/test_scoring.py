"""Scoring a prompt (`echo` with `logprobs`, as eval harnesses send it): each prompt token's log-probability
given the tokens before it, agreeing with the engine's own log-probabilities for the same tokens."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from modelport.engines import llamacpp
from tests.support.configs import NO_EOS
from tests.support.faces import Faces

PROMPT = "The capital of France is Paris."


@pytest.mark.one_face
@pytest.mark.slow
def test_echo_with_logprobs_and_no_tokens_scores_the_prompt(client: openai.OpenAI) -> None:
    reply = client.completions.create(model="gpt-4o-mini", prompt=PROMPT, max_tokens=0, echo=True, logprobs=3)
    choice = reply.choices[0]
    assert choice.text == PROMPT
    assert choice.logprobs is not None
    tokens, logprobs = choice.logprobs.tokens or [], choice.logprobs.token_logprobs or []
    assert "".join(tokens) == PROMPT
    assert logprobs[0] is None  # the first token has nothing before it, as OpenAI reports it
    assert all(value <= 0 for value in logprobs[1:])
    assert choice.logprobs.text_offset == [len("".join(tokens[:i])) for i in range(len(tokens))]
    for token, top in zip(tokens[1:], (choice.logprobs.top_logprobs or [])[1:], strict=True):
        assert token in top
        assert 3 <= len(top) <= 4
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (len(tokens), 0)


@pytest.mark.one_face
def test_scores_agree_with_the_engine_s_own_logprobs(client: openai.OpenAI) -> None:
    prompt = "The capital of France is"
    generated = client.completions.create(
        model="gpt-4o-mini", prompt=prompt, max_tokens=12, temperature=0, logprobs=2, logit_bias=NO_EOS
    ).choices[0]
    assert generated.logprobs is not None
    engine = generated.logprobs.token_logprobs or []
    scored = client.completions.create(
        model="gpt-4o-mini", prompt=prompt + generated.text, max_tokens=0, echo=True, logprobs=2
    ).choices[0]
    assert scored.logprobs is not None
    assert (scored.logprobs.tokens or [])[-len(engine) :] == generated.logprobs.tokens
    ours = (scored.logprobs.token_logprobs or [])[-len(engine) :]
    assert max(abs(a - b) for a, b in zip(ours, engine, strict=True)) < 0.15


@pytest.mark.one_face
def test_echo_with_logprobs_and_tokens_puts_the_scored_prompt_first(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model="gpt-4o-mini", prompt=[504, 3575, 282, 4649, 314], max_tokens=2, echo=True, logprobs=1,
        logit_bias=NO_EOS,
    )  # fmt: skip
    choice = reply.choices[0]
    assert choice.text.startswith("The capital of France is")
    assert choice.logprobs is not None
    assert len(choice.logprobs.tokens or []) == 5 + 2
    assert (choice.logprobs.token_logprobs or [])[0] is None


@pytest.mark.one_face
def test_prompts_scored_in_one_request_score_as_each_does_alone(client: openai.OpenAI) -> None:
    # Eval harnesses send several prompts a request; they are scored together (one pass over the output
    # matrix for all), and each choice is what that prompt scored alone is, in the prompts' order. An empty
    # prompt has no tokens to score (llama.cpp refused to embed none: a 500, found by the fuzzer).
    prompts = ["The capital of France is Paris.", "", "Two plus two is four", "A", "The sea is grey."]
    together = client.completions.create(
        model="gpt-4o-mini", prompt=prompts, max_tokens=0, echo=True, logprobs=2
    ).choices
    assert [c.index for c in together] == [0, 1, 2, 3, 4]
    for prompt, choice in zip(prompts, together, strict=True):
        alone = client.completions.create(
            model="gpt-4o-mini", prompt=prompt, max_tokens=0, echo=True, logprobs=2
        ).choices[0]
        assert choice.text == alone.text == prompt
        ours, theirs = choice.logprobs, alone.logprobs
        assert ours is not None
        assert theirs is not None
        assert ours.tokens == theirs.tokens
        assert ours.text_offset == theirs.text_offset
        pairs = list(zip(ours.token_logprobs or [], theirs.token_logprobs or [], strict=True))
        assert all(a == b if a is None or b is None else abs(a - b) < 1e-3 for a, b in pairs)
        for top, top_alone in zip(ours.top_logprobs or [], theirs.top_logprobs or [], strict=True):
            assert (top or {}).keys() == (top_alone or {}).keys()


def test_no_tokens_without_echo_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="gpt-4o-mini", prompt=PROMPT, max_tokens=0)
    assert caught.value.param == "max_tokens"


CAPITALS = Path(__file__).parent / "data" / "capitals.jsonl"
TASK = """\
task: modelport_capitals
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
"""


@pytest.mark.slow
def test_lm_evaluation_harness_scores_a_multiple_choice_task(
    server: Faces, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # lm-evaluation-harness's `local-completions` model, as people check a quantized GGUF: text requests,
    # and token-id requests with the model's own tokenizer (read from the GGUF by transformers).
    lm_eval = pytest.importorskip("lm_eval")
    transformers = pytest.importorskip("transformers")
    from lm_eval.tasks import TaskManager

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "task.yaml").write_text(TASK.format(data=CAPITALS))
    gguf = llamacpp.default_gguf()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    common = {
        "model": "smollm2-135m-instruct",
        "base_url": f"{server.url}/v1/completions",
        "tokenizer_backend": "huggingface",
        "tokenizer": str(tmp_path / "tokenizer"),  # counts the context's tokens in either mode
        "batch_size": 8,  # prompts a request, as a run of a real task asks them
    }
    # The task alone: the harness's own thousands of task files take 8 s to index, each time.
    tasks = TaskManager(include_path=str(tmp_path), include_defaults=False)
    results = {}
    for mode, extra in (("text", {"tokenized_requests": False}), ("ids", {"tokenized_requests": True})):
        out = lm_eval.simple_evaluate(
            model="local-completions",
            model_args={**common, **extra},
            tasks=["modelport_capitals"],
            task_manager=tasks,
            log_samples=True,
        )
        results[mode] = out
    questions = [json.loads(line) for line in CAPITALS.read_text().splitlines()]
    for out in results.values():
        assert 0.0 <= out["results"]["modelport_capitals"]["acc,none"] <= 1.0
        assert len(out["samples"]["modelport_capitals"]) == len(questions)
    # What the harness read is what the server says: the first question's choices scored again directly,
    # each the log-probability of its tokens after the question's (an echoed prompt, nothing generated).
    first = next(s for s in results["text"]["samples"]["modelport_capitals"] if s["doc_id"] == 0)
    question = questions[0]["question"]
    for choice, (read, _) in zip(questions[0]["choices"], first["filtered_resps"], strict=True):
        echoed = server.http.completions.create(
            model="smollm2-135m-instruct", prompt=f"{question} {choice}", echo=True, logprobs=1, max_tokens=0
        )
        scored = echoed.choices[0].logprobs
        assert scored is not None
        said = sum(
            lp
            for lp, at in zip(scored.token_logprobs or [], scored.text_offset or [], strict=True)
            if at >= len(question) and lp is not None
        )
        assert abs(said - read) < 0.01, (choice, said, read)
    by_text, by_ids = (
        [s["filtered_resps"] for s in results[m]["samples"]["modelport_capitals"]] for m in ("text", "ids")
    )
    for text_choices, id_choices in zip(by_text, by_ids, strict=True):
        for (text_ll, _), (id_ll, _) in zip(text_choices, id_choices, strict=True):
            assert abs(text_ll - id_ll) < 0.05
