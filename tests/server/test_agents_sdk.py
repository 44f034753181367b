"""The OpenAI Agents SDK on modelport: an agent on the default chat model through the Responses API, its
memory an `OpenAIConversationsSession` kept in modelport's Conversations API."""

from __future__ import annotations

import asyncio

import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIConversationsSession,
    OpenAIResponsesModel,
    Runner,
    set_tracing_disabled,
)

from tests.support.faces import Faces


@pytest.mark.slow
def test_an_agent_remembers_through_a_conversations_session(server: Faces) -> None:
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
