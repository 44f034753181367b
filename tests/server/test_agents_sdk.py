"""The OpenAI Agents SDK on modelport: an agent on the default chat model through the Responses API, its
memory an `OpenAIConversationsSession` kept in modelport's Conversations API, and a `FileSearchTool` the
server runs over a vector store. (`HostedMCPTool` is tried with the MCP servers of test_mcp_tools.)"""

from __future__ import annotations

import asyncio

import openai
import pytest

from tests.support.faces import Faces

MODEL = "smollm2-135m-instruct"


@pytest.mark.slow
def test_an_agent_remembers_through_a_conversations_session(server: Faces) -> None:
    # The SDK is imported by each test: 1.7 s of imports on every worker that collects the file.
    from agents import (
        Agent,
        ModelSettings,
        OpenAIConversationsSession,
        OpenAIResponsesModel,
        Runner,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)  # traces would go to OpenAI's servers

    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        model = OpenAIResponsesModel(model="smollm2-135m-instruct", openai_client=client)
        # Greedy, with room to finish: the SDK takes a turn cut by its token budget for a failure.
        settings = ModelSettings(temperature=0, max_tokens=256)
        agent = Agent(
            name="helper", instructions="Answer in one short sentence.", model=model, model_settings=settings
        )
        session = OpenAIConversationsSession(openai_client=client)
        first = await Runner.run(agent, "My name is Ada.", session=session, max_turns=1)
        assert first.final_output
        await Runner.run(agent, "What is my name?", session=session, max_turns=1)
        items = await session.get_items()  # read back from modelport's conversation, oldest first
        assert [item.get("role") for item in items] == ["user", "assistant", "user", "assistant"]
        assert "Ada" in str(items[0]["content"])
        await session.clear_session()
        await client.close()

    asyncio.run(run())


@pytest.mark.slow
def test_an_agent_searches_a_vector_store_the_server_keeps(server: Faces) -> None:
    from agents import (
        Agent,
        FileSearchTool,
        ModelSettings,
        OpenAIResponsesModel,
        Runner,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)
    note = b"The spare key of the boathouse hangs behind the blue door."
    file = server.http.files.create(file=("house.txt", note), purpose="assistants")
    store = server.http.vector_stores.create(name="house")
    server.http.vector_stores.files.create_and_poll(file.id, vector_store_id=store.id)

    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        model = OpenAIResponsesModel(model=MODEL, openai_client=client)
        search = FileSearchTool(vector_store_ids=[store.id], max_num_results=2, include_search_results=True)
        settings = ModelSettings(temperature=0, max_tokens=256, tool_choice="file_search")
        agent = Agent(name="keeper", instructions="Answer from the files.", model=model, tools=[search],
                      model_settings=settings)  # fmt: skip
        result = await Runner.run(agent, "Where is the boathouse key?", max_turns=1)
        calls = [item.raw_item for item in result.new_items if item.type == "tool_call_item"]
        assert calls[0].type == "file_search_call"
        assert calls[0].results[0].file_id == file.id
        assert "blue door" in calls[0].results[0].text
        await client.close()

    asyncio.run(run())


@pytest.mark.slow
def test_an_agent_with_the_sdk_s_default_model_and_settings_answers(server: Faces) -> None:
    # No model named: the SDK's default (a gpt-5 name) with its default settings, which send
    # `reasoning.effort` and `text.verbosity`; only a bound on the answer's length is added.
    from agents import (
        Agent,
        ModelSettings,
        Runner,
        set_default_openai_api,
        set_default_openai_client,
        set_tracing_disabled,
    )
    from agents.models import get_default_model, get_default_model_settings

    set_tracing_disabled(True)

    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        set_default_openai_client(client, use_for_tracing=False)
        set_default_openai_api("responses")
        settings = get_default_model_settings().resolve(ModelSettings(max_tokens=256, temperature=0))
        assert settings.reasoning is not None
        assert settings.verbosity is not None
        agent = Agent(name="helper", instructions="Answer in one short sentence.", model_settings=settings)
        result = await Runner.run(agent, "What is 2 + 2?", max_turns=1)
        assert result.final_output
        assert (await client.models.retrieve(get_default_model())).id == MODEL
        await client.close()

    asyncio.run(run())
