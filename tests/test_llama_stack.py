"""Llama Stack and ogx on top of a live modelport, configured by `modelport llama-stack-config`: chat, a
stream, a tool call, embeddings, vector stores and a Responses turn, all through the stack with the openai
SDK.

Both need Python >= 3.12, each in a virtual environment of its own (`scripts/install-llama-stack`); the
tests are skipped without them, unless MODELPORT_REQUIRE_LLAMA_STACK is set (as CI sets it)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import openai
import pytest
import yaml

from bench.common import serving
from tests.support.configs import NO_EOS
from tests.support.faces import Faces
from tests.support.live import ROOT, free_port

pytestmark = pytest.mark.slow  # two external stacks started as processes

STACKS = Path(os.environ.get("MODELPORT_LLAMA_STACK", ROOT / ".llama-stack")).resolve()
# How each stack is started on a config; ogx refuses to serve without TLS unless told it may.
COMMANDS = {
    "llama-stack": ["llama-stack/bin/llama", "stack", "run"],
    "ogx": ["ogx/bin/ogx", "run", "--insecure"],
}
CHAT, EMBEDDING = "modelport/smollm2-135m-instruct", "modelport/all-minilm-l6-v2"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def stack_config(server: Faces, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("llama-stack") / "run.yaml"
    command = [sys.executable, "-m", "modelport.cli", "llama-stack-config", "--url", f"{server.url}/v1"]
    result = subprocess.run([*command, "-o", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "all-minilm-l6-v2 (embedding, 384 dimensions)" in result.stderr
    return path


def test_the_config_registers_each_model_as_what_it_is(stack_config: Path) -> None:
    config = yaml.safe_load(stack_config.read_text())
    models = {m["model_id"]: m for m in config["registered_resources"]["models"]}
    # Speech and transcription models are left out: Llama Stack has no audio API.
    assert set(models) == {"smollm2-135m-instruct", "all-minilm-l6-v2"}
    assert models["smollm2-135m-instruct"]["model_type"] == "llm"
    assert models["all-minilm-l6-v2"]["model_type"] == "embedding"
    assert models["all-minilm-l6-v2"]["metadata"] == {"embedding_dimension": 384}
    inference = config["providers"]["inference"][0]
    assert inference["provider_type"] == "remote::vllm"
    assert inference["config"]["base_url"].endswith("/v1")


@pytest.fixture(scope="module", params=sorted(COMMANDS))
def stack(
    request: pytest.FixtureRequest, stack_config: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[openai.OpenAI]:
    program, *arguments = COMMANDS[request.param]
    if not (STACKS / program).exists():
        if os.environ.get("MODELPORT_REQUIRE_LLAMA_STACK"):
            pytest.fail(f"{request.param} is not installed in {STACKS}: run scripts/install-llama-stack")
        pytest.skip(f"{request.param} is not installed in {STACKS} (scripts/install-llama-stack)")
    port = free_port()
    env = {
        "TIKTOKEN_CACHE_DIR": str(STACKS / "tiktoken"),
        "SQLITE_STORE_DIR": str(tmp_path_factory.mktemp("llama-stack-data")),
    }
    command = [str(STACKS / program), *arguments, str(stack_config), "--port", str(port)]
    with serving(command, "/v1/health", port, request.param, env=env, seconds=120) as (url, _):
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=120)


def test_the_stack_lists_the_models_with_their_types(stack: openai.OpenAI) -> None:
    models = {m.id: (m.model_extra or {})["custom_metadata"] for m in stack.models.list().data}
    assert models[CHAT]["model_type"] == "llm"
    assert models[EMBEDDING]["model_type"] == "embedding"
    assert models[EMBEDDING]["embedding_dimension"] == 384


def test_chat_through_the_stack(stack: openai.OpenAI) -> None:
    answer = stack.chat.completions.create(
        model=CHAT, messages=[{"role": "user", "content": "Say hello."}], max_tokens=12
    )
    assert answer.choices[0].message.content
    assert answer.usage is not None
    assert answer.usage.completion_tokens <= 12


def test_a_stream_through_the_stack(stack: openai.OpenAI) -> None:
    stream = stack.chat.completions.create(
        model=CHAT,
        messages=[{"role": "user", "content": "Write a sentence about the sea."}],
        temperature=0,
        max_tokens=24,
        logit_bias=NO_EOS,  # when the model would stop is its choice; the stack's part is to pass pieces on
        stream=True,
    )
    parts = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(parts) > 3  # arrived in pieces, not as one answer


def test_a_tool_call_through_the_stack(stack: openai.OpenAI) -> None:
    answer = stack.chat.completions.create(
        model=CHAT,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="required",
        temperature=0,
        max_tokens=200,
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls
    assert calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    assert "city" in calls[0].function.arguments  # type: ignore[union-attr]


def test_embeddings_through_the_stack_are_modelports(
    stack: openai.OpenAI, http_client: openai.OpenAI
) -> None:
    texts = ["a cat sat on the mat", "the stock market fell"]
    through = stack.embeddings.create(model=EMBEDDING, input=texts)
    direct = http_client.embeddings.create(model="all-minilm-l6-v2", input=texts)
    for a, b in zip(through.data, direct.data, strict=True):
        assert np.allclose(a.embedding, b.embedding, atol=1e-5)


def test_a_vector_store_searches_with_modelports_embeddings(stack: openai.OpenAI) -> None:
    notes = [
        ("heron.txt", b"The project's mascot is a blue heron named Wren, who lives by the river."),
        ("bread.txt", b"Sourdough bread needs a starter, flour, water and a long, slow rise."),
    ]
    files = [
        stack.files.create(file=(name, io.BytesIO(text), "text/plain"), purpose="assistants")
        for name, text in notes
    ]
    store = stack.vector_stores.create(name="notes", file_ids=[f.id for f in files])
    deadline = time.monotonic() + 60
    while store.file_counts.completed < len(files):
        assert store.file_counts.failed == 0, store.file_counts
        assert time.monotonic() < deadline, store.file_counts
        time.sleep(0.2)
        store = stack.vector_stores.retrieve(store.id)
    found = stack.vector_stores.search(store.id, query="Which bird is the mascot?")
    assert "heron" in found.data[0].content[0].text


def test_a_responses_turn_through_the_stack(stack: openai.OpenAI) -> None:
    first = stack.responses.create(model=CHAT, input="Name a colour.", max_output_tokens=16)
    assert first.output_text
    second = stack.responses.create(
        model=CHAT, input="And another one.", previous_response_id=first.id, max_output_tokens=16
    )
    assert second.output_text
    # The stack does not echo previous_response_id; that the first turn was carried shows in the prompt.
    assert first.usage is not None
    assert second.usage is not None
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
