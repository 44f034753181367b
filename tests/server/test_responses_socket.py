"""The Responses API over a WebSocket, through the openai SDK's `client.beta.responses.connect()`: turns
chained on one connection (checked exactly with a model that answers with the conversation it was given),
three turns with a function call and its output on the default model, lanes (`stream_id`), and errors as
`error` events after which the connection goes on. Every event is the SDK's own type."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.beta import BetaResponsesServerEvent
from pydantic import TypeAdapter

from modelport.server.responses_socket import MOST_LANES
from modelport.settings import AuthSettings
from tests.service.test_responses import WEATHER
from tests.support.configs import tiny_settings
from tests.support.faces import Faces, faces
from tests.support.live import health_probed
from tests.support.machine_load import slack

EVENT: TypeAdapter[Any] = TypeAdapter(BetaResponsesServerEvent)


def turn(connection: Any, **create: Any) -> list[Any]:
    """One `response.create`, and its events up to the one that ends it (each validated strictly)."""
    connection.response.create(**create)
    events = []
    while True:
        raw = connection.recv_bytes()
        event = EVENT.validate_json(raw)
        events.append(event)
        if event.type in ("response.completed", "response.incomplete", "response.failed", "error"):
            return events


def text(response: Any) -> str:
    """A response's output text (the beta types have no `output_text`)."""
    return "".join(
        part.text
        for item in response.output
        if item.type == "message"
        for part in item.content
        if part.type == "output_text"
    )


def connected(served: Faces) -> Any:
    client = openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0)
    return client.beta.responses.connect()


def test_turns_chain_on_one_connection_and_errors_leave_it_open(tiny_faces: Faces) -> None:
    with connected(tiny_faces) as connection:
        one = turn(connection, model="recall", input="my colour is teal", instructions="be brief")
        refused = turn(connection, model="no-such-model", input="hello")
        first = one[-1].response
        two = turn(connection, model="recall", input="what is my colour", previous_response_id=first.id)
        kinds = [e.type for e in one]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in kinds
    assert text(first) == "system: be brief / user: my colour is teal"
    assert refused[-1].type == "error"
    assert refused[-1].error.code == "model_not_found"
    assert refused[-1].status == 404
    said = text(two[-1].response)
    assert said == f"user: my colour is teal / assistant: {text(first)} / user: what is my colour"
    retrieved = openai.OpenAI(base_url=f"{tiny_faces.url}/v1", api_key="unused").responses.retrieve(first.id)
    assert retrieved.output_text == text(first)  # stored, as over HTTP


def test_lanes_echo_their_stream_id_and_bad_events_are_errors(tiny_faces: Faces) -> None:
    with connected(tiny_faces) as connection:
        connection.send_raw(json.dumps({"type": "response.cancel"}))  # not served over this connection
        wrong = EVENT.validate_json(connection.recv_bytes())
        events = turn(connection, model="reverse", input="abc", stream_id="lane-a")
        background = turn(connection, model="reverse", input="abc", background=True)
    assert wrong.type == "error"
    assert wrong.error.param == "type"
    assert {e.stream_id for e in events} == {"lane-a"}
    assert events[-1].type == "response.completed"
    assert background[-1].type == "error"
    assert background[-1].error.param == "background"


@pytest.mark.models
def test_three_turns_with_a_function_call_on_one_connection(server: Faces) -> None:
    model = "gpt-4.1-mini"  # a client's default name, reaching the default chat model
    with connected(server) as connection:
        asked = turn(
            connection,
            model=model,
            input="What is the weather in Paris?",
            tools=[WEATHER],
            tool_choice="required",
            max_output_tokens=80,
        )[-1].response
        call = next(item for item in asked.output if item.type == "function_call")
        answered = turn(
            connection,
            model=model,
            previous_response_id=asked.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C."}],
            tools=[WEATHER],
            tool_choice="none",
            max_output_tokens=40,
        )[-1].response
        third = turn(
            connection,
            model=model,
            previous_response_id=answered.id,
            input="Thank you. Say goodbye.",
            max_output_tokens=20,
        )[-1].response
    assert call.name == "get_weather"
    assert set(json.loads(call.arguments)) == {"city"}
    assert text(answered)
    assert third.previous_response_id == answered.id
    assert text(third)


def test_a_revoked_key_closes_its_open_connection(tmp_path: Path) -> None:
    # Checked once at connect, a revoked key's connection once ran and stored a turn 7 s after revocation
    # while HTTP with the same key was already a 401.
    import websockets

    from tests.server.test_projects import closes_on_revocation, revocable_key

    database = str(tmp_path / "state.db")
    key_id, key = revocable_key(database, "agents")
    settings = tiny_settings(database)
    settings.auth = AuthSettings(key_cache_seconds=0.5)
    with faces(settings, api_key=key) as served:
        url = served.url.replace("http", "ws") + "/v1/responses"

        async def run() -> None:
            async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as ws:
                await ws.send(json.dumps({"type": "response.create", "model": "reverse", "input": "one two"}))
                while json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] != "response.completed":
                    pass
                await closes_on_revocation(ws, key_id, database, "the Responses WebSocket")

        asyncio.run(run())


def test_a_flood_of_lanes_is_bounded_and_the_connection_goes_on(tiny_faces: Faces) -> None:
    # Each new stream_id was a new task: nothing bounded what one connection could start.
    sent = MOST_LANES * 10
    with connected(tiny_faces) as connection, health_probed(tiny_faces.url) as waits:
        for i in range(sent):
            create = {"type": "response.create", "model": "reverse", "input": "a b", "stream_id": f"l{i}"}
            connection.send_raw(json.dumps(create))
        ends = []
        while len(ends) < sent:
            event = EVENT.validate_json(connection.recv_bytes())
            if event.type in ("response.completed", "error"):
                ends.append(event)
        after = turn(connection, model="reverse", input="c d", stream_id="l0")
    refused = [e for e in ends if e.type == "error"]
    assert len(refused) == sent - MOST_LANES
    assert {e.error.param for e in refused} == {"stream_id"}
    assert after[-1].type == "response.completed"  # a lane it holds still serves
    assert waits
    assert sorted(waits)[len(waits) // 2] < 0.1 * slack()  # the median: the loop is never held by the flood


def test_a_connection_past_its_length_limit_is_told_so_and_closed(tiny_faces: Faces) -> None:
    """As OpenAI's: a connection lasts 60 minutes (here a fifth of a second), then an `error` event whose
    code says so and a normal close; a turn on a new connection runs."""
    import websockets

    limits = tiny_faces.service.settings.limits
    kept, limits.responses_socket_minutes = limits.responses_socket_minutes, 1 / 300
    url = tiny_faces.url.replace("http", "ws") + "/v1/responses"

    async def run() -> tuple[dict[str, Any], int | None]:
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "response.create", "model": "reverse", "input": "one two"}))
            while (event := json.loads(await asyncio.wait_for(ws.recv(), 30)))["type"] != "error":
                pass
            with pytest.raises(websockets.ConnectionClosedOK):
                await asyncio.wait_for(ws.recv(), 30)
            return event, ws.close_code

    try:
        event, code = asyncio.run(run())
    finally:
        limits.responses_socket_minutes = kept
    assert event["error"]["code"] == "websocket_connection_limit_reached"
    assert code == 1000
    with connected(tiny_faces) as connection:
        assert turn(connection, model="reverse", input="three four")[-1].type == "response.completed"
