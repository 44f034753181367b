"""LangChain's `ChatOpenAI` on modelport, as its users point it at a server (`base_url`): on Chat Completions
and on the Responses API (`use_responses_api=True`), a tool bound with `bind_tools` and forced by its
`tool_choice`, its call run and its result given back for the answer, streamed. What the model says is its
own: the test checks what LangChain sends and reads back — the call's name and arguments (held to the tool's
schema by the server's grammar), the result message it answers, the stream's chunks adding up to an answer
with its usage."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.configs import NO_EOS
from tests.support.faces import Faces

MODEL = "smollm2-135m-instruct"


def chat_model(server: Faces, responses: bool) -> Any:
    """`ChatOpenAI` pointed at the server, greedy and brief. (LangChain is imported by each test: its
    imports would otherwise cost every worker that collects this file.)"""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=f"{server.url}/v1",
        api_key="unused",
        model=MODEL,
        temperature=0,
        max_tokens=48,
        max_retries=0,
        use_responses_api=responses,
        stream_usage=True,  # a stream's usage in its last chunk (Chat Completions' `include_usage`)
        # Answers of the whole 48 tokens: their text is there whatever the model says (a body field, since
        # the SDK's Responses API has no `logit_bias`; modelport reads it on both).
        extra_body={"logit_bias": NO_EOS},
    )


@pytest.mark.slow
@pytest.mark.parametrize("responses", [False, True], ids=["chat-completions", "responses"])
def test_a_bound_tool_is_called_run_and_answered(server: Faces, responses: bool) -> None:
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return f"It is sunny and 21 degrees in {city}."

    model = chat_model(server, responses)
    asked = HumanMessage("What is the weather like in Paris?")
    called = model.bind_tools([get_weather], tool_choice="get_weather").invoke([asked])
    assert isinstance(called, AIMessage)
    assert [call["name"] for call in called.tool_calls] == ["get_weather"]
    call = called.tool_calls[0]
    assert set(call["args"]) == {"city"}  # the schema LangChain made of the function, held by the grammar
    assert isinstance(call["args"]["city"], str)
    assert call["id"]
    result = get_weather.invoke(call)  # the ToolMessage LangChain makes of the call
    assert result.tool_call_id == call["id"]

    answered = model.bind_tools([get_weather], tool_choice="none").invoke([asked, called, result])
    assert isinstance(answered, AIMessage)
    assert answered.tool_calls == []
    assert answered.text  # the answer after the tool's result: text
    assert answered.usage_metadata is not None
    assert answered.usage_metadata["input_tokens"] > 0

    chunks = list(model.stream([asked, called, result]))
    assert len(chunks) > 1
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    # The chunks add up to an answer with its usage (not compared with the answer above: two generations
    # need not meet at every near tie).
    assert whole.text
    assert whole.usage_metadata is not None
    assert whole.usage_metadata["output_tokens"] > 0
