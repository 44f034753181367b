"""pydantic-ai on modelport: an agent's tool round trip over Chat Completions and over the Responses API (a
tiny predictor that calls the first tool it is offered with the user's words, then answers with the tool's
result), and structured output held to its schema by the server's grammar (the default chat model), whole
and streamed. What is checked is what the server decides, never the model's words."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, Field

from tests.support.configs import tiny_models
from tests.support.faces import Faces, faces

KEY = "sk-pydantic-ai"


class City(BaseModel):
    name: str = Field(max_length=20)
    country: str = Field(max_length=20)


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    database = str(tmp_path_factory.mktemp("pydantic-ai") / "state.db")
    with faces(tiny_models(database, KEY, tools="tool_chat"), api_key=KEY) as served:
        yield served


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_agent_calls_its_tool_and_answers_with_what_it_returned(tools: Faces, api: str) -> None:
    # Imported by the tests that use it, not at collection (a second or more of imports on every worker).
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=f"{tools.url}/v1", api_key=KEY)
    model = (
        OpenAIChatModel("tools", provider=provider)
        if api == "chat"
        else OpenAIResponsesModel("tools", provider=provider)
    )
    agent = Agent(model)
    asked: list[str] = []

    @agent.tool_plain
    def look_up(text: str) -> str:
        """Look a question up."""
        asked.append(text)
        return "forty-two"

    result = agent.run_sync("What is the answer?")
    assert asked == ["What is the answer?"]
    assert result.output == "forty-two"
    assert result.usage.requests == 2


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_structured_output_is_held_to_its_schema_whole_and_streamed(server: Faces, api: str) -> None:
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.settings import ModelSettings

    provider = OpenAIProvider(base_url=f"{server.url}/v1", api_key="unused")
    name = "smollm2-135m-instruct"
    model = (
        OpenAIChatModel(name, provider=provider)
        if api == "chat"
        else OpenAIResponsesModel(name, provider=provider)
    )
    # Room for the whole object: its strings are bounded by the schema, so the grammar ends it in time.
    agent = Agent(
        model, output_type=NativeOutput(City), model_settings=ModelSettings(max_tokens=80, temperature=0)
    )
    assert isinstance(agent.run_sync("Name a city in France.").output, City)

    async def streamed() -> list[City]:
        async with agent.run_stream("Name a city in Italy.") as stream:
            return [output async for output in stream.stream_output(debounce_by=None)]

    outputs = asyncio.run(streamed())
    assert outputs
    assert isinstance(outputs[-1], City)
