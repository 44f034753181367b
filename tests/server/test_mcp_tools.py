"""Remote MCP tools in the Responses API: MCP servers started here on 127.0.0.1 (the `mcp` package's
MCPServer, over streamable HTTP and over SSE only), reached through the outbound guard (allowed for
127.0.0.1 by the operator), listed, called with and without approval, and failing in the ways servers
fail — each an item of the answer, never a 500 or a hang. The default chat model is made to call the tool
(`tool_choice`), greedily."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import openai
import pytest

from modelport.settings import Limits, Settings
from tests.support.faces import Faces, faces
from tests.support.live import serve_app

if TYPE_CHECKING:  # imported where the servers are made: the `mcp` package takes 0.6 s of each collection
    from mcp.server.mcpserver import MCPServer

pytestmark = pytest.mark.models  # real models: not the unit tier

MODEL = "smollm2-135m-instruct"
FORECASTS: list[str] = []  # the cities the servers were asked about, in order


def weather() -> MCPServer:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("weather")

    @server.tool()
    def forecast(city: str) -> str:
        """The weather forecast for a city."""
        FORECASTS.append(city)
        return f"Sunny in {city}, 21 C"

    @server.tool()
    def storm(city: str) -> str:
        """Warnings of storms for a city."""
        raise ValueError("the storm service is down")

    return server


@dataclass
class Servers:
    served: Faces
    streamable: str
    sse: str
    hanging: str
    guarded: str  # needs `Authorization: Bearer <TOKEN>`


TOKEN = "tok-7f3a"


def bearer_only(app: Any) -> Any:
    """`app` behind a check of its bearer token, as an authenticated MCP server answers: 401 without it."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and dict(scope["headers"]).get(b"authorization") != f"Bearer {TOKEN}".encode()
        ):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return guarded


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    settings = Settings(allow_fetch=["127.0.0.1"], limits=Limits(mcp_seconds=3))
    with ExitStack() as stack:
        streamable = stack.enter_context(serve_app(weather().streamable_http_app()))
        sse = stack.enter_context(serve_app(weather().sse_app()))
        hanging = stack.enter_context(silent_server())
        guarded = stack.enter_context(serve_app(bearer_only(weather().streamable_http_app())))
        served = stack.enter_context(faces(settings))
        yield Servers(served, f"{streamable}/mcp", f"{sse}/sse", hanging, f"{guarded}/mcp")


def silent_server() -> Any:
    """A server that takes connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()

    class Silent:
        def __enter__(self) -> str:
            return f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"

        def __exit__(self, *_: object) -> None:
            listener.close()
            for connection in held:
                connection.close()

    return Silent()


def mcp(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "weather", "server_url": url, **extra}


def ask(client: Any, tool: dict[str, Any], name: str = "forecast", **extra: Any) -> Any:
    return client.responses.create(
        model=MODEL,
        input="What is the weather in Oslo?",
        tools=[tool],
        tool_choice={"type": "mcp", "server_label": "weather", "name": name},
        temperature=0,
        max_output_tokens=40,
        **extra,
    )


@pytest.mark.parametrize("face", ["http", "in-process"])
@pytest.mark.parametrize("transport", ["streamable", "sse"])
def test_a_servers_tools_are_listed_and_called(servers: Servers, face: str, transport: str) -> None:
    url = servers.streamable if transport == "streamable" else servers.sse
    answer = ask(servers.served.face(face), mcp(url, require_approval="never"))
    listed, call = answer.output[0], answer.output[1]
    assert listed.type == "mcp_list_tools"
    assert {tool.name for tool in listed.tools} == {"forecast", "storm"}
    assert listed.tools[0].input_schema["properties"]
    assert call.type == "mcp_call"
    assert call.status == "completed"
    assert call.name == "forecast"
    assert call.output.startswith("Sunny in ")
    assert '"city"' in call.arguments
    assert answer.output[-1].type == "message"


def test_a_call_waits_for_approval_and_runs_on_the_next_turn(servers: Servers) -> None:
    client = servers.served.http
    tool = mcp(servers.streamable, allowed_tools=["forecast"])
    first = ask(client, tool)
    listed, asked = first.output[0], first.output[-1]
    assert [t.name for t in listed.tools] == ["forecast"]  # allowed_tools
    assert asked.type == "mcp_approval_request"
    assert asked.name == "forecast"
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": True}],
        tools=[tool],
        tool_choice="none",  # answer from the approved call (the small model would call again)
        temperature=0,
        max_output_tokens=40,
    )
    call = second.output[0]
    assert call.type == "mcp_call"  # the listing is reused: no second mcp_list_tools
    assert call.approval_request_id == asked.id
    assert call.output.startswith("Sunny in ")
    assert second.output[-1].type == "message"


def test_an_approved_call_runs_once_though_its_approval_comes_back_with_the_whole_history(
    servers: Servers,
) -> None:
    # As the OpenAI Agents SDK sends a conversation: no previous_response_id, every item again each turn.
    client = servers.served.http
    tool = mcp(servers.streamable, allowed_tools=["forecast"])
    history: list[Any] = [{"role": "user", "content": "What is the weather in Oslo?"}]

    def turn(*new: Any) -> Any:
        history.extend(new)
        answer = client.responses.create(
            model=MODEL, input=history, tools=[tool], tool_choice="none", temperature=0, max_output_tokens=30
        )
        history.extend(item.model_dump(exclude_none=True) for item in answer.output)
        return answer

    first = ask(client, tool)  # the model is made to call the tool: the turn ends asking approval
    asked = first.output[-1]
    assert asked.type == "mcp_approval_request"
    history.extend(item.model_dump(exclude_none=True) for item in first.output)
    before = len(FORECASTS)
    approval = {"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": True}
    second = turn(approval)
    assert [item.type for item in second.output if item.type == "mcp_call"] == ["mcp_call"]
    third = turn({"role": "user", "content": "Thanks. And tomorrow?"})
    fourth = turn({"role": "user", "content": "Thank you."})
    assert len(FORECASTS) - before == 1  # the approved call ran once over three turns of full history
    for later in (third, fourth):
        assert not [item for item in later.output if item.type == "mcp_call"]


def test_a_declined_call_is_not_run(servers: Servers) -> None:
    client = servers.served.http
    tool = mcp(servers.streamable)
    first = ask(client, tool)
    asked = first.output[-1]
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": False}],
        tools=[tool],
        tool_choice="none",
        temperature=0,
        max_output_tokens=20,
    )
    assert [item.type for item in second.output] == ["message"]


def test_the_stream_says_each_step(servers: Servers) -> None:
    events = ask(servers.served.http, mcp(servers.streamable, require_approval="never"), stream=True)
    kinds = [event.type for event in events]
    for step in (
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
    ):
        assert step in kinds
    assert kinds.index("response.mcp_list_tools.completed") < kinds.index("response.mcp_call.in_progress")


def test_a_failing_tool_and_a_silent_server_are_error_items(servers: Servers) -> None:
    failed = ask(servers.served.http, mcp(servers.streamable, require_approval="never"), name="storm")
    call = failed.output[1]
    assert call.type == "mcp_call"
    assert call.status == "failed"
    assert call.error.type == "mcp_tool_execution_error"
    assert "Error executing tool storm" in str(call.error.content)  # what the server shows of it
    silent = servers.served.http.responses.create(
        model=MODEL, input="hi", tools=[mcp(servers.hanging)], max_output_tokens=16
    )
    listed = silent.output[0]
    assert listed.type == "mcp_list_tools"
    assert "did not answer within 3 s" in listed.error
    assert silent.status in ("completed", "incomplete")


def test_headers_for_the_server_are_neither_shown_nor_stored(servers: Servers) -> None:
    tool = mcp(servers.streamable, require_approval="never", headers={"Authorization": "Bearer s3cret"})
    answer = ask(servers.served.http, tool)
    assert answer.tools[0].headers is None
    stored = servers.served.http.responses.retrieve(answer.id)
    assert "s3cret" not in stored.model_dump_json()


def test_an_authorization_token_is_sent_as_a_bearer_token_and_never_shown(servers: Servers) -> None:
    refused = servers.served.http.responses.create(
        model=MODEL, input="hi", tools=[mcp(servers.guarded)], max_output_tokens=16
    )
    assert refused.output[0].type == "mcp_list_tools"
    assert refused.output[0].error  # the server answered 401 without the token
    tool = mcp(servers.guarded, require_approval="never", authorization=TOKEN)
    answer = ask(servers.served.http, tool)
    listed, call = answer.output[0], answer.output[1]
    assert listed.error is None
    assert call.type == "mcp_call"
    assert call.output.startswith("Sunny in ")
    assert answer.tools[0].authorization is None
    stored = servers.served.http.responses.retrieve(answer.id)
    assert TOKEN not in stored.model_dump_json()


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        (mcp("http://127.0.0.1:9/mcp"), "tools[0].server_url"),  # not allowed on the default server
        (mcp("http://10.0.0.1/mcp"), "tools[0].server_url"),
        (mcp("https://[::ffff:169.254.169.254]/mcp"), "tools[0].server_url"),
        ({"type": "mcp", "server_url": "https://example.com/mcp"}, "tools[0].server_label"),
        (mcp("https://example.com/mcp", require_approval="sometimes"), "tools[0].require_approval"),
        ({"type": "mcp", "server_label": "g", "connector_id": "connector_gmail"}, "tools[0].connector_id"),
    ],
)
def test_bad_mcp_tools_are_a_400_naming_them(
    http_client: openai.OpenAI, tool: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        http_client.responses.create(model=MODEL, input="hi", tools=[tool])
    assert caught.value.body["param"] == param


def test_an_agents_hosted_mcp_tool_asks_approval_and_gets_it(servers: Servers) -> None:
    from agents import Agent, HostedMCPTool, ModelSettings, OpenAIResponsesModel, Runner, set_tracing_disabled
    from agents.model_settings import MCPToolChoice

    set_tracing_disabled(True)
    asked: list[str] = []

    def approve(request: Any) -> Any:
        asked.append(request.data.name)
        return {"approve": True}

    async def run() -> Any:
        client = openai.AsyncOpenAI(base_url=f"{servers.served.url}/v1", api_key="unused", max_retries=0)
        tool = HostedMCPTool(
            tool_config={"type": "mcp", "server_label": "weather", "server_url": servers.streamable,
                         "allowed_tools": ["forecast"], "require_approval": "always"},
            on_approval_request=approve,
        )  # fmt: skip
        choice = MCPToolChoice(server_label="weather", name="forecast")
        settings = ModelSettings(temperature=0, max_tokens=128, tool_choice=choice)
        model = OpenAIResponsesModel(model=MODEL, openai_client=client)
        agent = Agent(name="forecaster", model=model, tools=[tool], model_settings=settings)
        result = await Runner.run(agent, "What is the weather in Oslo?", max_turns=3)
        await client.close()
        return result

    result = asyncio.run(run())
    assert asked == ["forecast"]
    kinds = [item.raw_item.type for item in result.new_items if hasattr(item.raw_item, "type")]
    assert "mcp_approval_request" in kinds
    calls = [item.raw_item for item in result.new_items if getattr(item.raw_item, "type", "") == "mcp_call"]
    assert calls[0].output.startswith("Sunny in ")
