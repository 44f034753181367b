"""Ollama's API, through the `ollama` Python client against `modelport serve`: chat and generate (NDJSON
streams and whole answers, thinking, tool turns given back, formats), embed and the older embeddings, the
model listings (tags, show, ps, version), `keep_alive`, keys, and errors in Ollama's shape. What is checked is
what the server decides, never a model's words: tiny predictors answer from their input, and SmolLM2 only
where a grammar or a bound decides."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import ollama
import pytest

from tests.support.configs import tiny_models
from tests.support.faces import Faces, faces

KEY = "sk-ollama-face"
ASK = [{"role": "user", "content": "one two three"}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    database = str(tmp_path_factory.mktemp("ollama") / "state.db")
    settings = tiny_models(
        database, KEY, reverse="reverse_chat", recall="recall_chat", ponder="ponder_chat",
        trigram="trigram_embed", caller="tool_chat", vllm="ponder_as_vllm_chat",
    )  # fmt: skip
    with faces(settings, api_key=KEY) as served:
        yield served


def client(served: Faces, key: str = KEY) -> ollama.Client:
    """Ollama's client pointed at the server (as `OLLAMA_HOST` points an app at it), with the key."""
    return ollama.Client(host=served.url, headers={"Authorization": f"Bearer {key}"}, timeout=120)


def test_chat_whole_and_streamed(tiny: Faces) -> None:
    whole = client(tiny).chat(model="reverse", messages=ASK, stream=False)
    assert whole.message.role == "assistant"
    assert whole.message.content == "three two one"
    assert whole.done
    assert whole.done_reason == "stop"
    assert (whole.prompt_eval_count, whole.eval_count) == (3, 3)
    assert whole.total_duration is not None
    assert whole.total_duration > 0  # from the request's start
    # Split at the first token, as Ollama's are: clients divide `eval_count` by `eval_duration` (a rate).
    assert whole.prompt_eval_duration is not None
    assert whole.eval_duration is not None
    assert whole.eval_duration > 0
    assert whole.prompt_eval_duration + whole.eval_duration <= whole.total_duration
    lines = list(client(tiny).chat(model="reverse", messages=ASK, options={"num_predict": 2}, stream=True))
    assert [line.done for line in lines] == [False] * (len(lines) - 1) + [True]
    assert "".join(line.message.content for line in lines) == "three two"
    assert lines[-1].done_reason == "length"
    assert lines[-1].eval_count == 2


@pytest.mark.parametrize(
    "kind",
    [None, "application/x-www-form-urlencoded", "text/plain"],
    ids=["none", "curl-d", "text"],
)
def test_a_body_is_read_as_json_whatever_its_content_type_as_ollama_reads_it(
    tiny: Faces, kind: str | None
) -> None:
    """LiteLLM's `ollama_chat` sends its JSON with no `Content-Type`, and Ollama's own documentation's
    `curl … -d '{…}'` with a form's; Ollama reads both. A web page's form or text (it has an `Origin`, and a
    browser posts those anywhere without asking first) is not read as JSON."""
    body = json.dumps({"model": "reverse", "messages": ASK, "stream": False}).encode()
    headers = {"Authorization": f"Bearer {KEY}", **({"Content-Type": kind} if kind else {})}
    answered = httpx.post(f"{tiny.url}/api/chat", content=body, headers=headers)
    assert answered.status_code == 200
    assert answered.json()["message"]["content"] == "three two one"
    if kind is not None:
        from_page = httpx.post(
            f"{tiny.url}/api/chat", content=body, headers={**headers, "Origin": "http://localhost:3000"}
        )
        assert from_page.status_code == 400
        assert "Content-Type: application/json" in from_page.json()["error"]


# `vllm` streams its thinking as `reasoning` (vLLM since 0.10, OpenRouter), `ponder` as `reasoning_content`.
@pytest.mark.parametrize("model", ["ponder", "vllm"])
def test_thinking_comes_apart_and_is_given_back(tiny: Faces, model: str) -> None:
    thought = client(tiny).chat(model=model, messages=ASK, think=True, stream=False)
    assert thought.message.thinking == "pondering one two three"
    assert thought.message.content == "nothing given back"
    streamed = list(client(tiny).chat(model=model, messages=ASK, think=True, stream=True))
    assert "".join(line.message.thinking or "" for line in streamed) == "pondering one two three"
    turns = [
        *ASK,
        {"role": "assistant", "content": "", "thinking": "earlier"},
        {"role": "user", "content": "x"},
    ]
    assert client(tiny).chat(model=model, messages=turns, stream=False).message.content == "earlier"


ADD = {
    "type": "function",
    "function": {"name": "add", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}},
}


def test_a_model_s_tool_call_comes_whole_with_its_arguments_as_an_object(tiny: Faces) -> None:
    whole = client(tiny).chat(model="caller", messages=ASK, tools=[ADD], stream=False)
    (call,) = whole.message.tool_calls or []
    assert call.function.name == "add"
    assert dict(call.function.arguments) == {"text": "one two three"}
    # Streamed, the call's pieces are held until its arguments are whole: one line carries it.
    lines = list(client(tiny).chat(model="caller", messages=ASK, tools=[ADD], stream=True))
    called = [line.message.tool_calls for line in lines if line.message.tool_calls]
    assert len(called) == 1
    assert dict(called[0][0].function.arguments) == {"text": "one two three"}
    assert lines[-1].done


def test_a_tool_turn_reaches_the_model_as_calls_and_their_results(tiny: Faces) -> None:
    call = {"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}
    turns = [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "5", "tool_name": "add"},
    ]
    recalled = client(tiny).chat(model="recall", messages=turns, stream=False).message.content
    # The call and its result, as the model's history shows them (this model reads no tool format).
    assert recalled is not None
    assert 'add {"a": 2, "b": 3}' in recalled
    assert recalled.endswith("5")


def test_generate_whole_streamed_and_raw(tiny: Faces, server: Faces) -> None:
    whole = client(tiny).generate(model="reverse", prompt="a b c", stream=False)
    assert whole.response == "c b a"
    assert whole.done
    assert (
        "".join(line.response for line in client(tiny).generate(model="reverse", prompt="a b c", stream=True))
        == "c b a"
    )
    # `raw` is the prompt as it is, a completion: bounded by `num_predict`, held by `format` (whose grammar
    # makes its first token, whatever the model would have said).
    raw = ollama.Client(host=server.url).generate(
        model="smollm2-135m-instruct", prompt="def add(a, b):", raw=True, stream=False, format="json",
        options={"num_predict": 5, "temperature": 0},
    )  # fmt: skip
    assert raw.done
    assert raw.eval_count is not None
    assert 0 < raw.eval_count <= 5
    assert raw.response.startswith("{")


def test_log_probabilities_come_with_their_tokens_when_asked(server: Faces) -> None:
    """`logprobs` (Ollama 0.12.11): each token's, with `top_logprobs` alternatives, on every answer and
    every line that carries text; none where not asked."""
    local = ollama.Client(host=server.url)
    asked: dict[str, Any] = {
        "model": "smollm2-135m-instruct",
        "options": {"num_predict": 4, "temperature": 0},
    }
    chat = local.chat(**asked, messages=ASK, stream=False, logprobs=True, top_logprobs=2)
    generated = local.generate(**asked, prompt="one two", stream=False, logprobs=True, top_logprobs=2)
    raw = local.generate(**asked, prompt="one two", raw=True, stream=False, logprobs=True, top_logprobs=2)
    for answer, text in ((chat, chat.message.content), (generated, generated.response), (raw, raw.response)):
        assert answer.logprobs is not None
        assert answer.eval_count is not None
        assert len(answer.logprobs) == answer.eval_count <= 4  # a token each, however soon the model ends
        assert "".join(token.token for token in answer.logprobs) == text
        assert all(len(token.top_logprobs or ()) == 2 for token in answer.logprobs)
    lines = list(local.chat(**asked, messages=ASK, stream=True, logprobs=True))
    told = [token for line in lines for token in line.logprobs or ()]
    assert "".join(token.token for token in told) == "".join(line.message.content or "" for line in lines)
    assert all(token.top_logprobs is None for token in told)
    assert local.chat(**asked, messages=ASK, stream=False).logprobs is None


def test_embed_truncates_unless_told_not_to_as_ollama_does(server: Faces) -> None:
    asked = {"model": "all-minilm-l6-v2", "input": "word " * 600}
    assert len(ollama.Client(host=server.url).embed(**asked).embeddings) == 1
    with pytest.raises(ollama.ResponseError) as refused:
        ollama.Client(host=server.url).embed(**asked, truncate=False)
    assert refused.value.status_code == 400


def test_show_says_insert_only_of_a_model_that_fills_in_the_middle(server: Faces) -> None:
    # FIM clients (Continue's autocomplete) look for `insert`: SmolLM2 has no fill-in-the-middle tokens, so
    # a `suffix` is a 400 and it was wrongly said of every model that completes.
    shown = ollama.Client(host=server.url).show("smollm2-135m-instruct").capabilities or []
    assert {"completion", "tools"} <= set(shown)
    assert "insert" not in shown
    with pytest.raises(ollama.ResponseError):
        ollama.Client(host=server.url).generate(model="smollm2-135m-instruct", prompt="def f(", suffix="):")


def test_show_gives_what_the_model_s_file_says_it_is(server: Faces) -> None:
    # Clients size their context from `model_info["<architecture>.context_length"]`, as Ollama gives it from
    # the GGUF's header (the model's training context, read whether or not it is loaded), and show
    # `details.parameter_size`.
    shown = ollama.Client(host=server.url).show("smollm2-135m-instruct")
    info = shown.modelinfo or {}
    architecture = info["general.architecture"]
    assert architecture == "llama"
    assert info[f"{architecture}.context_length"] == 8192
    assert info["general.parameter_count"] == 134_515_008  # its tensors' elements
    assert "tokenizer.chat_template" not in info  # the template is not the model's description
    assert shown.details is not None
    assert (shown.details.family, shown.details.parameter_size) == ("llama", "135M")
    assert shown.details.quantization_level == "Q4_1"  # as its tensors are
    assert not ollama.Client(host=server.url).show("whisper-tiny-en").modelinfo  # no GGUF: nothing said
    listed = {m.model: m.details for m in ollama.Client(host=server.url).list().models}
    chat = listed["smollm2-135m-instruct"]
    assert chat is not None
    assert (chat.family, chat.parameter_size) == ("llama", "135M")  # the listing says the same


def test_format_holds_the_answer_to_its_schema(server: Faces) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}},
        "required": ["city"],
    }
    said = ollama.Client(host=server.url).chat(
        model="smollm2-135m-instruct", messages=[{"role": "user", "content": "A city?"}], format=schema,
        options={"temperature": 0, "num_predict": 40}, stream=False,
    )  # fmt: skip
    jsonschema.validate(json.loads(said.message.content or ""), schema)


def test_embed_and_the_older_embeddings(tiny: Faces) -> None:
    made = client(tiny).embed(model="trigram", input=["alpha", "beta"])
    assert len(made.embeddings) == 2
    assert {len(vector) for vector in made.embeddings} == {64}
    one = client(tiny).embeddings(model="trigram", prompt="alpha")
    assert list(one.embedding) == pytest.approx(list(made.embeddings[0]), abs=1e-6)


def test_the_listings(tiny: Faces) -> None:
    names = {m.model for m in client(tiny).list().models}
    assert names == {"reverse", "recall", "ponder", "trigram", "caller", "vllm"}
    raw = httpx.get(f"{tiny.url}/api/tags", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert {m["name"] for m in raw["models"]} == names  # what Ollama's apps read
    assert "embedding" in (client(tiny).show("trigram").capabilities or [])
    assert "completion" in (client(tiny).show("reverse").capabilities or [])
    client(tiny).chat(model="reverse", messages=ASK)
    assert "reverse" in {m.model for m in client(tiny).ps().models}
    assert httpx.get(f"{tiny.url}/api/version", headers={"Authorization": f"Bearer {KEY}"}).json()["version"]


def test_keep_alive_zero_unloads_and_an_empty_request_loads(tiny: Faces) -> None:
    loaded = client(tiny).generate(model="recall")
    assert loaded.done_reason == "load"
    assert "recall" in {m.model for m in client(tiny).ps().models}
    kept = client(tiny).generate(model="recall", keep_alive="10m")
    assert kept.done_reason == "load"
    (shown,) = [m for m in client(tiny).ps().models if m.model == "recall"]
    assert shown.expires_at is not None  # ten minutes from its last use
    # Longer than a date can say is until unloaded (the fuzzer's 1e308 seconds made /api/ps a 500).
    client(tiny).generate(model="recall", keep_alive=1e308)
    (forever,) = [m for m in client(tiny).ps().models if m.model == "recall"]
    assert forever.expires_at is None
    unloaded = client(tiny).chat(model="recall", messages=[], keep_alive=0)
    assert unloaded.done_reason == "unload"
    assert "recall" not in {m.model for m in client(tiny).ps().models}


def test_errors_are_ollama_s_shape(tiny: Faces) -> None:
    with pytest.raises(ollama.ResponseError) as unknown:
        client(tiny).chat(model="no-such-model", messages=ASK, stream=False)
    assert unknown.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as wrong:
        client(tiny, "sk-wrong").list()
    assert wrong.value.status_code == 401
    for managed in (
        lambda c: c.pull("llama3"),
        lambda c: c.delete("reverse"),
        lambda c: c.create("mine", from_="reverse"),
    ):
        with pytest.raises(ollama.ResponseError) as refused:
            managed(client(tiny))
        assert "modelport pull" in refused.value.error
    bad = httpx.post(f"{tiny.url}/api/chat", content=b"{", headers={"Authorization": f"Bearer {KEY}"})
    assert bad.status_code == 400
    assert set(bad.json()) == {"error"}
    extreme = {"model": "reverse", "messages": ASK, "think": "extreme"}
    refused_think = httpx.post(
        f"{tiny.url}/api/chat", json=extreme, headers={"Authorization": f"Bearer {KEY}"}
    )
    assert refused_think.status_code == 400  # said once, naming it (not its union's members, `think.bool`)
    assert refused_think.json()["error"].startswith("Invalid value for 'think': true, false, or an effort")
    unknown_path = httpx.get(f"{tiny.url}/api/nothing", headers={"Authorization": f"Bearer {KEY}"})
    assert unknown_path.status_code == 404  # the router's refusal, in the face's shape too
    assert set(unknown_path.json()) == {"error"}


NONSENSE = {"type": "object", "properties": {"a": {"type": "nonsense"}}}
LONG = "x" * 200_001  # past the default `[limits] input_chars`


@pytest.mark.parametrize(
    ("path", "asked", "said"),
    [
        ("/api/chat", {"messages": ASK, "format": NONSENSE}, "format.properties.a.type"),
        ("/api/chat", {"messages": ASK, "options": {"temperature": 5}}, "'options.temperature'"),
        ("/api/chat", {"messages": [*ASK, {"role": "user", "content": LONG}]}, "'messages[1].content'"),
        ("/api/generate", {"prompt": LONG, "system": "s"}, "'prompt'"),
        ("/api/generate", {"prompt": "a", "system": LONG}, "'system'"),
    ],
)
def test_a_400_of_the_chat_a_request_becomes_names_what_was_sent(
    tiny: Faces, path: str, asked: dict[str, Any], said: str
) -> None:
    """The chat's checks name `response_format.json_schema.schema`, `temperature` and `messages[k]`; an
    Ollama request sent `format`, `options` and a generate request's `prompt` and `system`."""
    body = {"model": "reverse", "stream": False, **asked}
    refused = httpx.post(f"{tiny.url}{path}", json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert refused.status_code == 400
    assert said in refused.json()["error"]


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ({"format": NONSENSE}, "format: format.properties.a.type"),
        ({"options": {"stop": ["a", "b", "c", "d", "e"]}}, "'options.stop'"),
    ],
)
def test_a_400_of_a_raw_generate_names_what_was_sent(server: Faces, asked: dict[str, Any], said: str) -> None:
    """A raw generate is a completion of its prompt (its `format` as vLLM's `guided_json`): the completion's
    checks name `response_format…`, `guided_json` and `stop`; the request sent `format` and `options`."""
    body = {"model": "smollm2-135m-instruct", "prompt": "a", "raw": True, "stream": False, **asked}
    refused = httpx.post(f"{server.url}/api/generate", json=body)
    assert refused.status_code == 400
    assert said in refused.json()["error"]
