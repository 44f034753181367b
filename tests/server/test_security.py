"""API keys, CORS, the body bound, request ids and metrics, against a live server configured for them;
request limits and hostile chat templates in-process."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

import modelport
from modelport.settings import Limits, ModelConfig, Settings
from tests.support.faces import Faces, faces

# Tiny predictors: what is checked here is the server's (keys, CORS, bounds, metrics), not a model's.
CONFIG = """
defaults = false
cors_origins = ["https://app.example"]
max_upload_bytes = 300000

[limits]
body_bytes = 65536

[[models]]
id = "chat"
predictor = "tests.predictors.tiny_models:reverse_chat"
concurrency = 2

[[models]]
id = "embed"
predictor = "tests.predictors.tiny_models:trigram_embed"
"""
CHAT = {"model": "chat", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
KEYS = ["key-one", "key-from-file", "key-env-a", "key-env-b"]


@pytest.fixture(scope="module")
def guarded() -> Iterator[Faces]:
    """A server with keys (as `serve --api-key`, `--api-key-file` and MODELPORT_API_KEY give them: see
    `tests/test_cli.py`), CORS for one origin, and small bounds."""
    settings = Settings.model_validate({**tomllib.loads(CONFIG), "api_keys": KEYS})
    with faces(settings, api_key=KEYS[0]) as live:
        yield live


@pytest.mark.parametrize("key", KEYS)
def test_each_configured_key_opens_the_api(guarded: Faces, key: str) -> None:
    client = openai.OpenAI(base_url=f"{guarded.url}/v1", api_key=key, max_retries=0)
    assert client.chat.completions.create(**CHAT).choices  # type: ignore[call-overload]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "key-one"}])
def test_without_a_right_key_every_api_route_is_a_401_in_openai_shape(
    guarded: Faces, headers: dict[str, str]
) -> None:
    for method, path in (
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/openai/v1/models"),
    ):
        response = httpx.request(method, guarded.url + path, json=CHAT, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_api_key"
        assert response.json()["error"]["type"] == "invalid_request_error"
        assert response.headers["www-authenticate"] == "Bearer"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{guarded.url}/v1", api_key="wrong", max_retries=0).models.list()


def test_health_and_metrics_stay_open_and_metrics_count_requests_tokens_and_slots(
    guarded: Faces,
) -> None:
    assert httpx.get(f"{guarded.url}/health").status_code == 200
    client = openai.OpenAI(base_url=f"{guarded.url}/v1", api_key="key-one", max_retries=0)
    reply = client.chat.completions.create(**CHAT)  # type: ignore[call-overload]
    text = httpx.get(f"{guarded.url}/metrics").text
    assert 'modelport_requests_total{method="POST",route="/v1/chat/completions",status="200"}' in text
    assert 'modelport_request_seconds_bucket{le="0.005",route="/v1/chat/completions"}' in text
    assert 'modelport_tokens_total{kind="completion",model="chat"} ' in text
    assert reply.usage
    assert 'modelport_slots_total{model="chat"} 2.0' in text
    assert 'modelport_queue_depth{model="chat"} 0.0' in text
    assert 'route="other"' not in text or "/v1/unknown" not in text  # raw paths never become labels


def test_a_monitor_s_head_is_answered_as_get_without_the_body(guarded: Faces) -> None:
    for path in ("/health", "/metrics", "/"):  # open without a key, as for GET
        answered = httpx.head(f"{guarded.url}{path}")
        assert answered.status_code == 200, path
        assert answered.content == b""
        assert int(answered.headers["content-length"]) > 0


def test_request_ids_are_echoed_or_made(guarded: Faces) -> None:
    mine = httpx.get(f"{guarded.url}/health", headers={"x-request-id": "trace-42"})
    assert mine.headers["x-request-id"] == "trace-42"
    made = httpx.get(f"{guarded.url}/health")
    assert made.headers["x-request-id"].startswith("req_")
    refused = httpx.get(f"{guarded.url}/v1/models")  # errors carry one too
    assert refused.status_code == 401
    assert refused.headers["x-request-id"].startswith("req_")


def test_cors_answers_only_the_configured_origin(guarded: Faces) -> None:
    def preflight(origin: str) -> httpx.Response:
        return httpx.options(
            f"{guarded.url}/v1/chat/completions",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )

    allowed = preflight("https://app.example")
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    refused = preflight("https://evil.example")
    assert "access-control-allow-origin" not in refused.headers


def test_a_body_over_the_bound_is_a_413(guarded: Faces) -> None:
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * 70_000}]}
    headers = {"Authorization": "Bearer key-one"}
    response = httpx.post(f"{guarded.url}/v1/chat/completions", json=big, headers=headers)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"model": "chat", "messages": [{"role": "user", "content": "'
        for _ in range(80):
            yield b"x" * 1000
        yield b'"}]}'

    response = httpx.post(
        f"{guarded.url}/v1/chat/completions",
        content=chunked(),
        headers={**headers, "content-type": "application/json"},
    )
    assert response.status_code == 413


def test_uploads_have_their_own_bound_with_or_without_a_length(guarded: Faces) -> None:
    url = f"{guarded.url}/v1/audio/transcriptions"
    headers = {"Authorization": "Bearer key-one"}
    # Over body_bytes but under max_upload_bytes: it reaches the route (which has no such model).
    allowed = httpx.post(
        url, data={"model": "whisper-1"}, files={"file": ("a.wav", b"\x00" * 200_000)}, headers=headers
    )
    assert allowed.status_code == 404

    def chunked() -> Iterator[bytes]:
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
        for _ in range(2000):
            yield b"\x00" * 1000

    refused = httpx.post(
        url,
        content=chunked(),
        headers={**headers, "content-type": "multipart/form-data; boundary=b"},
    )
    assert refused.status_code == 413
    assert refused.json()["error"]["param"] == "file"
    assert "300000" in refused.json()["error"]["message"]


def test_cors_is_off_by_default(server: Faces) -> None:
    response = httpx.options(
        f"{server.url}/v1/models",
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET"},
    )
    assert "access-control-allow-origin" not in response.headers


def test_on_a_loopback_address_only_this_machine_s_names_are_served(tiny_faces: Faces) -> None:
    """A web page that rebinds its domain to 127.0.0.1 calls the server as itself, its domain in `Host`:
    refused, on every route and the WebSockets, while every name of this machine is served."""
    import asyncio
    import socket

    import websockets

    port = tiny_faces.url.rsplit(":", 1)[1]
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.attacker.example"):
        refused = httpx.get(f"{tiny_faces.url}/v1/models", headers={"Host": host})
        assert refused.status_code == 403, host
        assert refused.json()["error"]["code"] == "host_not_allowed"
    refused = httpx.post(
        f"{tiny_faces.url}/v1/chat/completions", json=CHAT, headers={"Host": "attacker.example"}
    )
    assert refused.status_code == 403
    for host in (f"localhost:{port}", "app.localhost", f"127.0.0.1:{port}", "[::1]", socket.gethostname()):
        assert httpx.get(f"{tiny_faces.url}/v1/models", headers={"Host": host}).status_code == 200, host

    async def opened(host: str) -> None:
        url = tiny_faces.url.replace("http", "ws") + "/v1/responses"
        async with websockets.connect(url, additional_headers={"Host": host}):
            pass

    with pytest.raises(websockets.InvalidStatus) as closed:
        asyncio.run(opened("attacker.example"))
    assert closed.value.response.status_code == 403
    asyncio.run(opened(f"localhost:{port}"))


def test_on_a_loopback_address_pages_of_other_origins_are_refused(tiny_faces: Faces) -> None:
    """Browsers apply no CORS to WebSockets (a page reads every message) nor to form posts: a page of
    another site could use the models through either. Refused; pages of this machine and apps' are not."""
    import asyncio

    import websockets

    url = tiny_faces.url.replace("http", "ws") + "/v1/responses"

    async def opened(origin: str) -> None:
        async with websockets.connect(url, origin=origin) as ws:  # type: ignore[arg-type]
            await ws.send(json.dumps({"type": "response.create", "model": "reverse", "input": "one two"}))
            while json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] != "response.completed":
                pass

    for page in ("https://attacker.example", "http://203.0.113.5", "null"):
        with pytest.raises(websockets.InvalidStatus) as closed:
            asyncio.run(opened(page))
        assert closed.value.response.status_code == 403, page
        posted = httpx.post(
            f"{tiny_faces.url}/v1/files", files={"file": ("a.txt", b"x")}, data={"purpose": "user_data"},
            headers={"Origin": page},
        )  # fmt: skip
        assert posted.status_code == 403, page
        assert posted.json()["error"]["code"] == "origin_not_allowed"
    for page in (tiny_faces.url, "http://localhost:3000", "http://app.localhost", "app://chat", "file://"):
        asyncio.run(opened(page))


def test_names_and_pages_the_operator_allows_are_served_and_other_addresses_are_not_guarded() -> None:
    tiny = [ModelConfig(id="chat", predictor="tests.predictors.tiny_models:reverse_chat")]
    allowing = Settings(
        defaults=False, models=tiny, allowed_hosts=["proxy.example"], cors_origins=["https://app.example"]
    )
    with faces(allowing) as served:
        asked = {"Host": "proxy.example", "Origin": "https://app.example"}
        assert httpx.get(f"{served.url}/v1/models", headers=asked).status_code == 200
        assert httpx.get(f"{served.url}/v1/models", headers={"Host": "other.example"}).status_code == 403
        assert (
            httpx.get(f"{served.url}/v1/models", headers={"Origin": "https://other.example"}).status_code
            == 403
        )
    # `*`: any name (a page of another origin is still refused); off a loopback address, the keys guard it.
    assert (guard_answer(["*"], {"host": "any.example"}), guard_answer(["*"], {"origin": "https://x.y"})) == (
        200,
        403,
    )
    assert not Settings(host="0.0.0.0").on_loopback()
    assert all(Settings(host=host).on_loopback() for host in ("127.0.0.1", "127.0.0.9", "::1", "localhost"))


def guard_answer(allowed: list[str], headers: dict[str, str]) -> int:
    """The status the host guard alone gives a request with these headers (the app behind it answers 200)."""
    import asyncio

    from starlette.responses import PlainTextResponse

    from modelport.server.host_guard import HostGuard

    guard = HostGuard(PlainTextResponse("ok"), allowed=allowed, origins=[])

    async def ask() -> int:
        transport = httpx.ASGITransport(app=guard)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return (await client.get("/v1/models", headers=headers)).status_code

    return asyncio.run(ask())


@pytest.fixture(scope="module")
def limited() -> Iterator[modelport.OpenAI]:
    limits = Limits(messages=3, embedding_inputs=4, input_chars=50, max_tokens=8, n=2)
    client = modelport.OpenAI(settings=Settings(limits=limits))
    yield client
    client.close()


U = {"role": "user", "content": "a"}


@pytest.mark.parametrize(
    ("endpoint", "arguments", "param"),
    [
        ("chat", {"messages": [U] * 4}, "messages"),
        ("chat", {"messages": [{"role": "user", "content": "a" * 51}]}, "messages[0].content"),
        ("chat", {"messages": [U], "max_tokens": 9}, "max_tokens"),
        ("chat", {"messages": [U], "max_completion_tokens": 9}, "max_completion_tokens"),
        ("chat", {"messages": [U], "n": 3}, "n"),
        ("completions", {"prompt": "a", "best_of": 3, "max_tokens": 1}, "best_of"),
        ("completions", {"prompt": "a" * 51}, "prompt"),
        ("embeddings", {"input": ["a"] * 5}, "input"),
        ("embeddings", {"input": "a" * 51}, "input"),
        # The Responses API's own names, not those of the chat request it becomes.
        ("responses", {"input": [U] * 4}, "input"),
        ("responses", {"input": "a" * 51}, "input"),
        ("responses", {"input": [U, {"role": "user", "content": "a" * 51}]}, "input[1].content"),
        ("responses", {"input": "a", "instructions": "a" * 51}, "instructions"),
        ("responses", {"input": "a", "max_output_tokens": 17}, "max_output_tokens"),
    ],
)
def test_each_limit_is_a_400_naming_the_parameter(
    limited: modelport.OpenAI, endpoint: str, arguments: dict[str, object], param: str
) -> None:
    create = {
        "chat": lambda: limited.chat.completions.create(model="gpt-4o-mini", **arguments),  # type: ignore[call-overload]
        "completions": lambda: limited.completions.create(model="gpt-3.5-turbo-instruct", **arguments),  # type: ignore[call-overload]
        "embeddings": lambda: limited.embeddings.create(model="text-embedding-3-small", **arguments),  # type: ignore[arg-type]
        "responses": lambda: limited.responses.create(model="gpt-4o-mini", **arguments),  # type: ignore[arg-type]
    }[endpoint]
    with pytest.raises(openai.BadRequestError) as caught:
        create()
    assert caught.value.body["param"] == param  # type: ignore[index]
    assert "limit" in caught.value.body["message"]  # type: ignore[index]
    assert f"'{param}'" in caught.value.body["message"]  # type: ignore[index]


HOSTILE = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}{% for m in messages %}{{ m.content }}{% endfor %}",
    "{% include '/etc/passwd' %}{% for m in messages %}{{ m.content }}{% endfor %}",
    "{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}"
    "{% for m in messages %}{{ m.content }}{% endfor %}",
]


@pytest.mark.parametrize("template", HOSTILE)
@pytest.mark.slow
def test_a_hostile_chat_template_runs_no_code_and_fails_cleanly(template: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    model = ModelConfig.model_validate(
        {"id": "hostile", "engine": "llamacpp", "chat_template": template.replace("{marker}", str(marker))}
    )
    client = modelport.OpenAI(settings=Settings(defaults=False, models=[model]))
    try:
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model="hostile", messages=[{"role": "user", "content": "hi"}])
        assert "`hostile` failed to load" in caught.value.body["message"]  # type: ignore[index]
    finally:
        client.close()
    assert not marker.exists()
