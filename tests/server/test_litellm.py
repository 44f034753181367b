"""LiteLLM, a client nobody here wrote, on every face modelport serves: its `openai/` provider (Chat
Completions whole and streamed, thinking, embeddings, the Responses API), its `ollama_chat/` provider on the
Ollama face and its `anthropic/` provider on the Anthropic face. Tiny predictors answer (one that calls the
first tool it is offered with the user's words, one that thinks aloud), so what is checked is what the server
decides and LiteLLM reads back, never a model's words."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelport.settings import ModelConfig, Settings, StoreSettings
from tests.support.faces import Faces, faces

pytestmark = pytest.mark.slow  # an external stack: LiteLLM takes seconds to import

KEY = "sk-litellm"
TOOL = {
    "type": "function",
    "function": {
        "name": "look_up",
        "description": "Look a question up.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}
ASKED = [{"role": "user", "content": "What is the answer?"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    models = [
        ModelConfig(id="tools", predictor="tests.predictors.tiny_models:tool_chat"),
        ModelConfig(id="ponder", predictor="tests.predictors.tiny_models:ponder_chat"),
        ModelConfig(id="trigrams", predictor="tests.predictors.tiny_models:trigram_embed"),
    ]
    database = Path(tmp_path_factory.mktemp("litellm")) / "state.db"
    settings = Settings(defaults=False, models=models, store=StoreSettings(url=str(database)), api_keys=[KEY])
    with faces(settings, api_key=KEY) as live:
        yield live


@pytest.fixture(scope="module")
def litellm() -> Any:
    # Its table of models' prices comes with the package; it would fetch a newer one from GitHub first.
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    return litellm


def test_openai_provider_reads_a_call_whole_and_built_from_its_stream(served: Faces, litellm: Any) -> None:
    sent = {"model": "openai/tools", "api_base": f"{served.url}/v1", "api_key": KEY, "messages": ASKED}
    whole = litellm.completion(**sent, tools=[TOOL])
    chunks = list(
        litellm.completion(**sent, tools=[TOOL], stream=True, stream_options={"include_usage": True})
    )
    built = litellm.stream_chunk_builder(chunks, messages=ASKED)
    for reply in (whole, built):
        (call,) = reply.choices[0].message.tool_calls
        assert (call.function.name, call.function.arguments) == ("look_up", '{"text": "What is the answer?"}')
        assert reply.choices[0].finish_reason == "tool_calls"
        assert reply.usage.total_tokens > 0


def test_openai_provider_reads_the_thinking_apart_whole_and_streamed(served: Faces, litellm: Any) -> None:
    sent = {"model": "openai/ponder", "api_base": f"{served.url}/v1", "api_key": KEY, "messages": ASKED}
    message = litellm.completion(**sent).choices[0].message
    deltas = [chunk.choices[0].delta for chunk in litellm.completion(**sent, stream=True) if chunk.choices]
    streamed = (
        "".join(getattr(delta, "reasoning_content", None) or "" for delta in deltas),
        "".join(delta.content or "" for delta in deltas),
    )
    assert (message.reasoning_content, message.content) == streamed
    assert streamed == ("pondering What is the answer?", "nothing given back")


# LiteLLM serializes its own copy of a response's usage, in Chat Completions' fields, into its Responses type.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
def test_openai_provider_embeds_and_answers_through_the_responses_api(served: Faces, litellm: Any) -> None:
    at = {"api_base": f"{served.url}/v1", "api_key": KEY}
    embedded = litellm.embedding(model="openai/trigrams", input=["a b c", "d e"], **at)
    assert [row["index"] for row in embedded.data] == [0, 1]
    tool = {"type": "function", "name": "look_up", "parameters": TOOL["function"]["parameters"]}
    answer = litellm.responses(model="openai/tools", input="What is it?", tools=[tool], **at)
    (call,) = answer.output
    assert (call.type, call.name, call.arguments) == ("function_call", "look_up", '{"text": "What is it?"}')
    # LiteLLM passes on the event types it knows (not `response.reasoning_text.*`); the reasoning item whole.
    events = list(litellm.responses(model="openai/ponder", input="Why?", stream=True, **at))
    assert (events[0].type, events[-1].type) == ("response.created", "response.completed")
    assert [item.type for item in events[-1].response.output] == ["reasoning", "message"]


def test_ollama_chat_provider_reads_a_call_and_a_stream_on_the_ollama_face(
    served: Faces, litellm: Any
) -> None:
    sent = {"api_base": served.url, "api_key": KEY, "messages": ASKED}
    message = litellm.completion(model="ollama_chat/tools", tools=[TOOL], **sent).choices[0].message
    (call,) = message.tool_calls
    assert (call.function.name, call.function.arguments) == ("look_up", '{"text": "What is the answer?"}')
    chunks = litellm.completion(model="ollama_chat/ponder", stream=True, **sent)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == (
        "nothing given back"
    )


def test_anthropic_provider_reads_a_call_whole_and_streamed_on_the_anthropic_face(
    served: Faces, litellm: Any
) -> None:
    sent = {"model": "anthropic/tools", "api_base": served.url, "api_key": KEY, "max_tokens": 50}
    whole = litellm.completion(**sent, messages=ASKED, tools=[TOOL])
    (call,) = whole.choices[0].message.tool_calls
    assert call.function.name == "look_up"
    assert whole.choices[0].finish_reason == "tool_calls"
    chunks = list(litellm.completion(**sent, messages=ASKED, tools=[TOOL], stream=True))
    pieces = [piece for chunk in chunks if chunk.choices for piece in chunk.choices[0].delta.tool_calls or []]
    assert "".join(piece.function.arguments or "" for piece in pieces) == call.function.arguments
    assert [piece.function.name for piece in pieces if piece.function.name] == ["look_up"]
