"""The operation table is where an endpoint exists: the app serves its rows and nothing else, each row's body
bound is held before the body is read, admission (keys, the project's allowed models and rate limits)
applies to every row on every face, and the in-process client is the SDK itself (its raw and streaming
responses, `parse`, `stream()` helpers and pagination)."""

from __future__ import annotations

import asyncio
import http.client
import inspect
import io
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ParsedChatCompletion

import modelport
from modelport.predictors.contract import Capability
from modelport.server import create_app
from modelport.service import Service
from modelport.service.operation_table import OPERATIONS
from modelport.service.operations import BODY, FORM_ROOM, PART_BYTES, UPLOAD, Operation, OperationTable
from modelport.settings import AuthSettings, Limits
from tests.server.test_projects import cli, new_key
from tests.server.test_responses_socket import turn
from tests.support.configs import tiny_settings
from tests.support.faces import Faces, faces

USER = [{"role": "user", "content": "one two"}]


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The app's OpenAPI document."""
    database = tmp_path_factory.mktemp("document") / "state.db"
    return create_app(service=Service.from_settings(tiny_settings(str(database)))).openapi()


def test_the_app_serves_the_rows_of_the_table_and_nothing_else(document: dict[str, Any]) -> None:
    documented = {
        (method.upper(), path)
        for path, methods in document["paths"].items()
        if path.startswith("/v1/")
        for method in methods
    }
    # Beside the rows, only the transport of a realtime session: a WebRTC call's offer (the WebSockets of
    # `/v1/realtime` and `/v1/responses` are not in an OpenAPI document; ending a call is a row), and
    # Anthropic's Messages API, a face over the chat row (its Message Batches over the files and batches
    # rows).
    calls = {("POST", "/v1/realtime/calls"), ("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens")}
    batches = "/v1/messages/batches"
    calls |= {("POST", batches), ("GET", batches), ("GET", f"{batches}/{{message_batch_id}}")}
    calls |= {
        ("POST", f"{batches}/{{message_batch_id}}/cancel"),
        ("GET", f"{batches}/{{message_batch_id}}/results"),
    }
    assert documented == {(op.method, op.route) for op in OPERATIONS} | calls
    assert {op.route for op in OPERATIONS if op.batchable} == {
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/responses",
    }


def test_the_faces_answers_are_documented_in_their_own_shapes_and_every_reference_resolves(
    document: dict[str, Any],
) -> None:
    """Anthropic's and Ollama's answers (their packages' types, added as the document is first made) are
    named beside OpenAI's, and no `$ref` anywhere in the document dangles."""

    def answer(path: str, method: str) -> Any:
        return document["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]

    assert answer("/v1/messages", "post") == {"$ref": "#/components/schemas/AnthropicMessage"}
    assert answer("/api/chat", "post") == {"$ref": "#/components/schemas/OllamaChatResponse"}
    assert answer("/api/tags", "get") == {"$ref": "#/components/schemas/OllamaTags"}
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(document)))
    assert {"AnthropicMessage", "OllamaChatResponse", "OllamaShowResponse"} <= refs
    assert refs - set(document["components"]["schemas"]) == set()


def test_each_capability_is_relayed_by_the_one_row_that_says_so() -> None:
    relayed = {op.capability: op.name for op in OPERATIONS if op.relayed is not None}
    assert relayed == {
        Capability.CHAT: "chat.completions.create",
        Capability.COMPLETION: "completions.create",
        Capability.EMBEDDING: "embeddings.create",
        Capability.SPEECH: "audio.speech.create",
        Capability.TRANSCRIPTION: "audio.transcriptions.create",
        Capability.TRANSLATION: "audio.translations.create",
    }
    assert all(OPERATIONS.relayed(c).name == name for c, name in relayed.items())
    chat = OPERATIONS.by_name("chat.completions.create")
    with pytest.raises(ValueError, match="one operation relays each"):
        OperationTable([chat, replace(chat, name="again")])  # a second row relaying chat
    with pytest.raises(ValueError, match="names its capability"):
        OperationTable([replace(chat, capability=None)])


def test_a_call_is_ended_through_its_row_on_every_face(tiny_served: Faces) -> None:
    for client in (tiny_served.http, tiny_served.inprocess):
        with pytest.raises(openai.NotFoundError) as unknown:
            client.realtime.calls.hangup("rtc_nope")
        assert unknown.value.param == "call_id"
        with pytest.raises(openai.NotFoundError):
            client.realtime.calls.reject("rtc_nope")


def test_openai_s_own_prefix_reaches_the_same_rows(tiny: openai.OpenAI, tiny_faces: Faces) -> None:
    mirrored = openai.OpenAI(base_url=f"{tiny_faces.url}/v1/openai/v1", api_key="unused", max_retries=0)
    assert [m.id for m in mirrored.models.list()] == [m.id for m in tiny.models.list()]
    assert mirrored.models.retrieve("reverse").id == "reverse"  # a path's parameter
    with mirrored.beta.responses.connect() as connection:  # a transport's WebSocket
        assert turn(connection, model="reverse", input="abc", store=False)[-1].type == "response.completed"
    unknown = httpx.post(f"{tiny_faces.url}/v1/openai/v1/nothing/here")
    assert unknown.status_code == 404
    assert "(POST /v1/openai/v1/nothing/here)" in unknown.json()["error"]["message"]  # the path as sent


@pytest.fixture(scope="module")
def tiny_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    with faces(tiny_settings(str(tmp_path_factory.mktemp("ops") / "state.db"))) as served:
        yield served


def _example_path(path: str) -> str:
    return path.replace("{model_id:path}", "some/model").replace("{", "x_").replace("}", "")


@pytest.mark.parametrize(
    "operation", [op for op in OPERATIONS if op.method == "POST"], ids=lambda op: op.name
)
def test_each_row_s_body_bound_is_held_before_the_body_is_read(
    tiny_served: Faces, operation: Operation
) -> None:
    settings = tiny_served.service.settings
    limit = operation.body_limit(settings)
    host, port = tiny_served.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.putrequest("POST", "/v1" + _example_path(operation.path))
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(limit + 1))
    connection.endheaders()  # no body follows: an answer now proves nothing was waited for
    answer = connection.getresponse()
    body = json.loads(answer.read())
    if operation.admin:  # the organization API asks for an admin key first: nothing was read either
        assert answer.status == 401
        return
    assert answer.status == 413
    assert body["error"]["code"] == "payload_too_large"
    uploads = UPLOAD in operation.inputs
    assert body["error"]["param"] == (operation.upload_field if uploads else None)
    expected = {
        "audio.transcriptions.create": settings.max_upload_bytes + FORM_ROOM,
        "audio.translations.create": settings.max_upload_bytes + FORM_ROOM,
        "files.create": settings.files.max_bytes + FORM_ROOM,
        "uploads.parts.create": PART_BYTES + FORM_ROOM,
    }
    assert limit == expected.get(operation.name, settings.limits.body_bytes)


def test_the_in_process_client_holds_each_row_s_body_bound_too(tmp_path: Path) -> None:
    settings = tiny_settings(str(tmp_path / "state.db"))
    settings.limits = Limits(body_bytes=1000)
    client = modelport.OpenAI(settings=settings)
    try:
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(
                model="reverse", messages=[{"role": "user", "content": "x " * 600}]
            )
        assert caught.value.status_code == 413
        assert client.chat.completions.create(model="reverse", messages=USER).choices[0].message.content
    finally:
        client.close()


def nested(levels: int, leaf: Any, key: str) -> Any:
    for _ in range(levels):
        leaf = {"type": "array", key: leaf}
    return leaf


def test_json_nested_past_its_bound_is_a_400_on_every_face_and_every_row(tiny: openai.OpenAI) -> None:
    """A tool's schema 250 levels deep was a 500 (the schema's walk ran out of recursion), a Responses
    `text.format` of 300 a dropped connection (pydantic's serializer ran out of depth)."""
    deep = nested(150, {"type": "string"}, "items")
    with pytest.raises(openai.BadRequestError, match="deeper than 128 levels"):
        tiny.chat.completions.create(
            model="reverse", messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": deep}}],
        )  # fmt: skip
    with pytest.raises(openai.BadRequestError, match="deeper than 128 levels"):
        tiny.responses.create(
            model="reverse", input="hi", text={"format": {"type": "json_schema", "name": "x", "schema": deep}}
        )
    with pytest.raises(openai.BadRequestError, match="deeper than 128 levels"):
        tiny.embeddings.create(model="reverse", input="hi", extra_body={"deep": nested(130, 1, "x")})
    # Up to the bound, a body is served (a field of its own it does not read, as deep as the bound allows).
    reply = tiny.chat.completions.create(
        model="reverse",
        messages=[{"role": "user", "content": "one two"}],
        extra_body={"x": nested(63, 1, "x")},
    )
    assert reply.choices[0].message.content


def test_a_text_part_without_a_string_text_is_a_400_on_every_way_in(
    tiny: openai.OpenAI, tiny_faces: Faces
) -> None:
    """Found by the fuzz test: `{"type": "text"}` failed in llama.cpp's reading of the messages, and a `text`
    of an object in `/generate`'s template rendering (500s)."""
    for part in ({"type": "text"}, {"type": "text", "text": {"a": 1}}, {"text": ["a"]}):
        messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}]
        with pytest.raises(openai.BadRequestError, match=r"content\[1\]\.text must be a string"):
            tiny.chat.completions.create(model="reverse", messages=messages)  # type: ignore[misc, list-item]
        answer = httpx.post(f"{tiny_faces.url}/generate", json={"messages": messages}, timeout=30)
        assert answer.status_code == 400, answer.text


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/api/chat", "/generate"])
def test_every_face_holds_json_nesting_to_the_bound_with_or_without_a_content_type(
    tiny_faces: Faces, path: str
) -> None:
    body = json.dumps(
        {"model": "reverse", "messages": [{"role": "user", "content": "hi"}], "x": nested(130, 1, "x")}
    )
    for headers in ({"content-type": "application/json"}, {}):
        answer = httpx.post(f"{tiny_faces.url}{path}", content=body, headers=headers, timeout=30)
        assert answer.status_code == 400, answer.text
        assert "deeper than 128 levels" in answer.text


def test_a_json_body_under_a_path_ending_in_files_is_held_to_the_json_bound(tiny_served: Faces) -> None:
    operation, _ = OPERATIONS.get("POST", "/vector_stores/vs_1/files")
    assert BODY in operation.inputs
    assert (
        operation.body_limit(tiny_served.service.settings) == tiny_served.service.settings.limits.body_bytes
    )


def test_in_process_the_sdk_s_own_call_patterns_work(tiny_served: Faces) -> None:
    client = tiny_served.inprocess
    assert isinstance(client, openai.OpenAI)
    raw = client.chat.completions.with_raw_response.create(model="reverse", messages=USER)
    assert raw.headers["content-type"] == "application/json"
    assert raw.parse().choices[0].message.content == "two one"
    with client.chat.completions.with_streaming_response.create(
        model="reverse", messages=USER, stream=True
    ) as response:
        lines = [line for line in response.iter_lines() if line]
    assert lines[0].startswith("data: {")
    assert lines[-1] == "data: [DONE]"
    parsed = client.chat.completions.parse(model="reverse", messages=USER)
    assert isinstance(parsed, ParsedChatCompletion)
    assert parsed.choices[0].message.content == "two one"
    with client.chat.completions.stream(model="reverse", messages=USER) as stream:
        kinds = {event.type for event in stream}
        assert "content.delta" in kinds
        assert stream.get_final_completion().choices[0].message.content == "two one"
    with client.responses.stream(model="reverse", input="three four") as events:
        names = [event.type for event in events]
        assert names[0] == "response.created"
        assert names[-1] == "response.completed"
        assert events.get_final_response().output_text == "four three"
    chunks = list(client.chat.completions.create(model="reverse", messages=USER, stream=True))
    assert all(isinstance(chunk, ChatCompletionChunk) for chunk in chunks)
    made = [
        client.chat.completions.create(model="reverse", messages=USER, store=True, metadata={"page": "walk"})
        for _ in range(3)
    ]
    first = client.chat.completions.list(limit=1, metadata={"page": "walk"})
    assert len(first.data) == 1
    assert first.has_next_page()
    assert [c.id for c in first] == [c.id for c in made]  # iterating a page walks every later page
    assert [len(page.data) for page in first.iter_pages()] == [1, 1, 1]


def test_in_process_raw_responses_carry_the_request_id_as_http_does(tiny_served: Faces) -> None:
    for client in (tiny_served.http, tiny_served.inprocess):
        raw = client.chat.completions.with_raw_response.create(model="reverse", messages=USER)
        assert raw.headers["x-request-id"].startswith("req_")
        assert raw.parse()._request_id == raw.headers["x-request-id"]
        given = client.models.with_raw_response.list(extra_headers={"x-request-id": "mine-1"})
        assert given.headers["x-request-id"] == "mine-1"
    streamed = [
        client.chat.completions.with_raw_response.create(model="reverse", messages=USER, stream=True)
        for client in (tiny_served.http, tiny_served.inprocess)
    ]
    assert streamed[0].headers["content-type"] == streamed[1].headers["content-type"]


@pytest.mark.parametrize("face", ["http", "in-process"])
def test_multipart_fields_are_read_as_their_types(tiny_served: Faces, face: str) -> None:
    client = tiny_served.face(face)
    made = client.files.create(
        file=("n.txt", b"note"), purpose="user_data", expires_after={"anchor": "created_at", "seconds": 86400}
    )
    assert made.expires_at == made.created_at + 86400
    with pytest.raises(openai.BadRequestError) as caught:
        client.files.create(
            file=("n.txt", b"note"),
            purpose="user_data",
            expires_after={"anchor": "created_at", "seconds": 60},
        )
    assert caught.value.body["param"] == "expires_after.seconds"


def test_the_async_in_process_client_is_the_sdk_s_too(tiny_served: Faces) -> None:
    async def run() -> None:
        async with modelport.AsyncOpenAI(service=tiny_served.service) as client:
            assert isinstance(client, openai.AsyncOpenAI)
            whole = await client.chat.completions.create(model="reverse", messages=USER)
            assert isinstance(whole, ChatCompletion)
            raw = await client.chat.completions.with_raw_response.create(model="reverse", messages=USER)
            assert raw.parse().choices[0].message.content == "two one"  # the SDK parses it at once
            async with client.responses.stream(model="reverse", input="a b") as events:
                async for _ in events:
                    pass
                assert (await events.get_final_response()).output_text == "b a"
            await client.files.create(file=("n.txt", b"note"), purpose="user_data")
            seen = [f.id async for f in client.files.list(limit=1)]
            assert len(seen) >= 1

    asyncio.run(run())


# Admission: every row, every face.


@dataclass
class Limited:
    served: Faces
    database: str
    key: str  # of a project allowed `recall` alone, at 1 request a minute
    wrong: str = "sk-not-a-key"
    # A client a key and face, made once: each makes a TLS context (20-50 ms), and the rows are 70-odd.
    clients: dict[tuple[str, str], openai.OpenAI] = field(default_factory=dict)

    def http(self, key: str) -> openai.OpenAI:
        if ("http", key) not in self.clients:
            url = f"{self.served.url}/v1"
            self.clients["http", key] = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60)
        return self.clients["http", key]

    def inprocess(self, key: str) -> modelport.OpenAI:
        if ("in-process", key) not in self.clients:
            self.clients["in-process", key] = modelport.OpenAI(service=self.served.service, api_key=key)
        return self.clients["in-process", key]  # type: ignore[return-value]


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Limited]:
    database = str(tmp_path_factory.mktemp("admission") / "state.db")
    cli("projects", "create", "narrow", "--database", database, "--rpm", "1", "--models", "recall")
    key = new_key(database, "narrow")
    settings = tiny_settings(database)
    settings.auth = AuthSettings(key_cache_seconds=0.5, usage_flush_seconds=0.2)
    with faces(settings) as served:
        made = Limited(served, database, key)
        yield made
        for client in made.clients.values():
            client.close()


def _send(client: openai.OpenAI, operation: Operation, body: dict[str, object] | None) -> object:
    """One request to a row, through the SDK's generic methods (so every row is reached the same way)."""
    path = _example_path(operation.path)
    if operation.method == "GET":
        return client.get(path, cast_to=object)
    if operation.method == "DELETE":
        return client.delete(path, cast_to=object)
    if UPLOAD in operation.inputs:
        files = [("file", ("a.wav", b"RIFF"))]
        form = {"headers": {"Content-Type": "multipart/form-data"}}  # as the SDK's upload methods send it
        return client.post(path, cast_to=object, files=files, body=body, options=form)
    return client.post(path, cast_to=object, body=body if operation.body_model is not None else None)


BODIES: dict[str, dict[str, object]] = {
    "chat.completions.create": {"messages": USER},
    "completions.create": {"prompt": "x"},
    "embeddings.create": {"input": "x"},
    "audio.speech.create": {"input": "x", "voice": "alloy"},
    "responses.create": {"input": "x"},
    "files.create": {"purpose": "batch"},
}


def asks(operation: Operation, model: str = "reverse") -> dict[str, object]:
    """A body each row would accept, asking for `model`."""
    return {"model": model, **BODIES.get(operation.name, {"messages": USER, "input": "x"})}


@pytest.mark.parametrize("operation", list(OPERATIONS), ids=lambda op: op.name)
def test_every_row_needs_a_key_on_both_faces(limited: Limited, operation: Operation) -> None:
    for client in (limited.http(limited.wrong), limited.inprocess(limited.wrong)):
        with pytest.raises(openai.AuthenticationError):
            _send(client, operation, asks(operation))


MODEL_ROWS = [op for op in OPERATIONS if op.capability is not None]


@pytest.mark.parametrize("operation", MODEL_ROWS, ids=lambda op: op.name)
def test_every_model_row_holds_the_project_s_allowed_models_on_both_faces(
    limited: Limited, operation: Operation
) -> None:
    for client in (limited.http(limited.key), limited.inprocess(limited.key)):
        with pytest.raises(openai.NotFoundError) as refused:  # a model the project may not use
            _send(client, operation, asks(operation))
        assert refused.value.code == "model_not_found"


@pytest.mark.parametrize("name", ["chat.completions.create", "responses.create"])
def test_the_project_s_rate_holds_across_both_faces(limited: Limited, name: str) -> None:
    operation = OPERATIONS.by_name(name)
    allowed = asks(operation, "recall")
    http, inprocess = limited.http(limited.key), limited.inprocess(limited.key)
    answered = refused = 0
    for client in (http, inprocess, http, inprocess):  # the minute's one request at most, then refusals
        try:
            _send(client, operation, allowed)
            answered += 1
        except openai.RateLimitError:
            refused += 1
    assert answered <= 1
    assert refused >= 3


def test_a_vector_store_cannot_be_made_on_an_embedding_model_the_project_may_not_use(
    limited: Limited,
) -> None:
    for client in (limited.http(limited.key), limited.inprocess(limited.key)):
        with pytest.raises(openai.NotFoundError) as refused:  # its ingest would embed with it later
            client.vector_stores.create(name="x", extra_body={"embedding_model": "reverse"})
        assert refused.value.code == "model_not_found"


def test_batch_lines_run_under_their_project_s_models_and_limits(limited: Limited) -> None:
    client = limited.http(limited.key)
    lines = [
        {"custom_id": f"{i}", "method": "POST", "url": url, "body": {"model": model, "messages": USER}}
        for i, (url, model) in enumerate(
            [("/v1/chat/completions", "reverse"), ("/v1/chat/completions", "recall")] * 3
        )
    ]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    uploaded = client.files.create(file=("lines.jsonl", io.BytesIO(content)), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 60
    while batch.status not in ("completed", "failed", "cancelled", "expired"):
        assert time.monotonic() < deadline
        time.sleep(0.2)
        batch = client.batches.retrieve(batch.id)
    assert batch.status == "completed"
    assert batch.error_file_id is not None
    errors = [json.loads(line) for line in client.files.content(batch.error_file_id).text.splitlines()]
    codes = sorted(e["response"]["body"]["error"]["code"] for e in errors)
    # The three lines for `reverse` are the project's forbidden model; of the three for `recall`, a
    # minute's one request at most went through.
    assert codes.count("model_not_found") == 3
    assert codes.count("rate_limit_exceeded") >= 2


def test_integers_past_64_bits_in_a_query_are_a_400_naming_them(tiny_served: Faces) -> None:
    # Each once a 500 (OverflowError in SQLite), or a 200 stream cut off mid-body; every query value of every
    # row is read by the one function that checks these (the Usage API's start_time and page too).
    huge = str(2**70)
    for path, name in [
        (f"/v1/responses/resp_x?stream=true&starting_after={huge}", "starting_after"),
        (f"/v1/chat/completions?limit={huge}", "limit"),
    ]:
        answer = httpx.get(tiny_served.url + path, timeout=30)
        assert answer.status_code == 400, (path, answer.text)
        assert answer.json()["error"]["param"] == name


def test_a_required_query_parameter_left_out_is_a_400_naming_it_on_both_faces(tiny_served: Faces) -> None:
    """As FastAPI says it over HTTP; in-process the service's call was made without it (a TypeError)."""
    required = [
        (operation, name)
        for operation in OPERATIONS
        if operation.method == "GET" and not operation.path_names()
        for name in operation.query_names()
        if operation.inputs[name].default is inspect.Parameter.empty
    ]
    assert required  # `/audio/voices` names its model
    for operation, name in required:
        answer = httpx.get(tiny_served.url + "/v1" + operation.path, timeout=30)
        assert (answer.status_code, answer.json()["error"]["param"]) == (400, name)
        with pytest.raises(openai.BadRequestError) as caught:
            tiny_served.inprocess.get(operation.path, cast_to=object)
        assert (caught.value.param, caught.value.code) == (name, "missing")
        with pytest.raises(openai.BadRequestError) as over_http:
            tiny_served.http.get(operation.path, cast_to=object)
        assert str(caught.value) == str(over_http.value)  # the SDK's text: the status and the message


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("get", "/containers", 404),
        ("post", "/moderations", 404),
        ("get", "/embeddings", 405),
        ("post", "/files/x", 405),
    ],
)
def test_a_url_nothing_serves_or_a_method_its_endpoint_does_not_take_is_refused_alike_on_both_faces(
    tiny_served: Faces, method: str, path: str, status: int
) -> None:
    """HTTP's router and the in-process client's table say it in the same words (the in-process client
    answered a wrong method as an unknown URL, in other words)."""
    refused = []
    for face in (tiny_served.http, tiny_served.inprocess):
        with pytest.raises(openai.APIStatusError) as caught:
            getattr(face, method)(path, cast_to=object, **({"body": {}} if method == "post" else {}))
        refused.append((type(caught.value), caught.value.status_code, str(caught.value), caught.value.body))
    assert refused[0] == refused[1]
    assert refused[0][1] == status
