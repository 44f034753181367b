"""A property-based driver over the Realtime API's client events: every event type the `openai` package
knows, each of its fields given any JSON value, sent over one WebSocket to a transcription session. Whatever
is sent, the server answers with events its types accept (an `error` for what it refuses, never a
`server_error`), and the session goes on: a `session.update` after them all is answered."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.realtime.realtime_client_event_param import RealtimeClientEventParam

from tests.server.conftest import listening_settings
from tests.server.test_fuzz_shapes import JSON, shapes
from tests.server.test_realtime import SERVER_EVENT
from tests.support.faces import Faces, faces

pytestmark = [pytest.mark.slow, pytest.mark.models]

EXAMPLES = int(os.environ.get("MODELPORT_FUZZ_EXAMPLES", "25")) * 4
EVENTS = shapes(RealtimeClientEventParam)


@pytest.fixture(scope="module")
def listening(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    database = str(tmp_path_factory.mktemp("fuzz-realtime") / "state.db")
    with faces(listening_settings(database)) as served:
        yield served


@st.composite
def events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A few client events of known types, some of their fields each any JSON value."""
    made = []
    for _ in range(draw(st.integers(1, 4))):
        kind, fields = draw(st.sampled_from(EVENTS))
        chosen = draw(st.lists(st.sampled_from([f for f in fields if f != "type"]), max_size=3, unique=True))
        made.append({"type": kind, **{field: draw(JSON) for field in chosen}})
    return made


def test_no_client_event_breaks_a_session(listening: Faces, tmp_path: Path) -> None:
    import websockets

    url = listening.url.replace("http", "ws") + "/v1/realtime?intent=transcription"

    async def session(sent: list[dict[str, Any]]) -> list[Any]:
        async with websockets.connect(url, subprotocols=["realtime"], max_size=None) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
            for event in sent:
                await ws.send(json.dumps(event))
            await ws.send(json.dumps({"type": "session.update", "event_id": "last",
                                      "session": {"type": "transcription"}}))  # fmt: skip
            seen = []
            while True:
                event = SERVER_EVENT.validate_json(await asyncio.wait_for(ws.recv(), 30))
                seen.append(event)
                if event.type == "session.updated" or (
                    event.type == "error" and event.error.event_id == "last"
                ):
                    return seen

    @given(sent=events())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def fuzz(sent: list[dict[str, Any]]) -> None:
        seen = asyncio.run(session(sent))
        assert seen[-1].type == "session.updated", (sent, seen[-1])
        assert not [e for e in seen if e.type == "error" and e.error.type == "server_error"], sent

    fuzz()
