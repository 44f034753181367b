"""Remote models against upstreams on 127.0.0.1: a real modelport app over tiny models, and a small app that
answers the shapes no real server can be made to produce (hangs, garbage, 429s, streams cut short)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import modelport
from modelport.engines import assemble
from modelport.predictors.registry import ModelRegistry
from modelport.server import create_app
from modelport.service import Service
from modelport.settings import ModelConfig, Settings
from tests.predictors.tiny_models import loudness_transcriber, reverse_chat, tone_speech, trigram_embed
from tests.support.live import serve_app, wait_healthy
from tests.support.machine_load import slack

KEY = "sk-upstream-secret-0123456789"
CROWD = 120  # more streams at once than aiohttp's default cap of 100 connections
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
WHOLE = {
    "id": "c",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}

# Upstreams that refuse a field they do not know, `stream_options` among them: the body and status each
# answers with (Azure OpenAI's older API versions; a FastAPI server whose request model forbids extras).
STRICT: dict[str, tuple[dict[str, Any], int]] = {
    "strict": (
        {
            "error": {
                "message": "Unrecognized request argument supplied: stream_options",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
        400,
    ),
    "forbidding": (
        {
            "detail": [
                {
                    "type": "extra_forbidden",
                    "loc": ["body", "stream_options"],
                    "msg": "Extra inputs are not permitted",
                    "input": {"include_usage": True},
                }
            ]
        },
        422,
    ),
}


class Odd:
    """An upstream whose answer depends on the model asked for, optionally on one replica only
    (`hang@a`: replica `a` hangs, the others answer normally). It records what it was sent."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.listing = ["qwen2.5", "qwen3", "llama3.2", "mistral"]
        self.crowd = 0
        self.crowded = asyncio.Event()
        routes = [
            Route("/{replica}/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/{replica}/v1/models", self.models),
        ]
        self.app = Starlette(routes=routes)

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": m, "object": "model"} for m in self.listing]})

    async def chat(self, request: Request) -> Response:
        replica = request.path_params["replica"]
        body = await request.json()
        self.seen.append((replica, dict(request.headers), body))
        behaviour, _, only = body["model"].partition("@")
        if only and only != replica:
            behaviour = "fine"
        if behaviour == "hang":
            await asyncio.sleep(60)
        if behaviour == "html":
            return PlainTextResponse("<html>Bad gateway</html>", media_type="text/html")
        if behaviour == "notjson":
            return Response(b"{not json", media_type="application/json")
        if behaviour == "shape":
            return JSONResponse({"hello": "world"})
        if behaviour == "busy":
            error = {"message": "slow down", "type": "rate_limit_error", "param": None, "code": "busy"}
            # The wait to the millisecond where it disagrees with the whole seconds: the first is read.
            waits = {"Retry-After": "60", "retry-after-ms": "6500"}
            return JSONResponse({"error": error}, 429, headers=waits)
        if behaviour == "teapot":
            return PlainTextResponse("no tea here", 418)
        if behaviour == "unknown":
            error = {
                "message": "model not found",
                "type": "invalid_request_error",
                "param": "model",
                "code": 404,
            }
            return JSONResponse({"error": error}, 404)
        if behaviour == "crash":
            return JSONResponse({"error": {"message": "CUDA out of memory", "type": "server_error"}}, 500)
        if behaviour == "crowd":  # answers once `CROWD` requests are in flight together
            self.crowd += 1
            if self.crowd == CROWD:
                self.crowded.set()
            await self.crowded.wait()
        if behaviour in STRICT and "stream_options" in body:  # a server whose request model forbids it
            return JSONResponse(*STRICT[behaviour])
        if behaviour in STRICT and body.get("stream"):

            async def streamed() -> Any:
                for delta, end in (({"role": "assistant", "content": "fine"}, None), ({}, "stop")):
                    piece = {**CHUNK, "choices": [{"index": 0, "delta": delta, "finish_reason": end}]}
                    yield f"data: {json.dumps(piece)}\n\n".encode()
                yield b"data: [DONE]\n\n"

            return StreamingResponse(streamed(), media_type="text/event-stream")
        if behaviour == "cut":

            async def cut() -> Any:
                piece = {
                    **CHUNK,
                    "choices": [{"index": 0, "delta": {"content": "Once"}, "finish_reason": None}],
                }
                yield f"data: {json.dumps(piece)}\n\n".encode()

            return StreamingResponse(cut(), media_type="text/event-stream")
        return JSONResponse(WHOLE)


def remote(model_id: str, upstreams: list[str], **options: Any) -> ModelConfig:
    return ModelConfig.model_validate({"id": model_id, "engine": "remote", "upstreams": upstreams, **options})


@pytest.fixture(scope="module")
def odd() -> Iterator[tuple[Odd, str]]:
    upstream = Odd()
    with serve_app(upstream.app) as url:
        yield upstream, url


@pytest.fixture(scope="module")
def tiny_upstream() -> Iterator[str]:
    """A real modelport over tiny predictors, as another team's server would be."""
    registry = ModelRegistry()
    registry.add_predictor("reverse", reverse_chat)
    registry.add_predictor("trigram", trigram_embed)
    registry.add_predictor("tones", tone_speech)
    registry.add_predictor("loudness", loudness_transcriber)
    with serve_app(create_app(service=Service(registry))) as url:
        wait_healthy(url)  # its models loaded, so its listing says what each serves
        yield f"{url}/v1"


@pytest.fixture(scope="module")
def front(odd: tuple[Odd, str], tiny_upstream: str, monkeypatch_module: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch_module.setenv("ODD_KEY", KEY)
    _, url = odd
    a, b = f"{url}/a/v1", f"{url}/b/v1"
    quick = {"first_byte_timeout": 1.0, "cooldown": 0.5, "api_key_env": "ODD_KEY"}
    models = [
        remote("tiny-chat", [tiny_upstream], upstream_model="reverse"),
        remote("tiny-embed", [tiny_upstream], upstream_model="trigram", capabilities=["embedding"]),
        remote("tiny-speech", [tiny_upstream], upstream_model="tones", capabilities=["speech"]),
        remote("tiny-ears", [tiny_upstream], upstream_model="loudness", capabilities=["transcription"]),
        remote("tiny", [tiny_upstream], discover=True, allowed_models=["rev*", "tri*"], refresh=0.5),
        *(
            remote(name, [a, b], upstream_model=name, **quick)
            for name in ["hang", "hang@a", "html", "notjson", "shape", "busy", "busy@b", "teapot"]
        ),
        *(
            remote(name, [a], upstream_model=name, **quick)
            for name in ["unknown", "crash", "cut", "fine", *STRICT]
        ),
        remote("crowd", [f"{url}/c/v1"], upstream_model="crowd", first_byte_timeout=20, max_in_flight=CROWD),
        remote("ollama", [a], discover=True, prefix="", allowed_models=["qwen*"], refresh=0.5, **quick),
        remote("nowhere", ["http://127.0.0.1:9/v1"], health="/health", cooldown=30),
    ]
    settings = Settings(defaults=False, models=models)
    with serve_app(create_app(settings)) as url:
        yield url


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def sdk(front: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{front}/v1", api_key="unused", max_retries=0, timeout=30)


def ask(front: str, model: str, **extra: Any) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "one two three"}], **extra}
    return httpx.post(f"{front}/v1/chat/completions", json=body, timeout=30)


def test_every_capability_passes_through_a_real_upstream(front: str) -> None:
    client = sdk(front)
    reply = client.chat.completions.create(
        model="tiny-chat", messages=[{"role": "user", "content": "one two three"}]
    )
    assert reply.model == "tiny-chat"
    assert reply.choices[0].message.content == "three two one"
    streamed = client.chat.completions.create(
        model="tiny-chat",
        messages=[{"role": "user", "content": "a b c d"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(streamed)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "d c b a"
    assert {c.model for c in chunks} == {"tiny-chat"}
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 4
    vectors = client.embeddings.create(model="tiny-embed", input=["a cat", "a cat", "quantum"])
    rows = [v.embedding for v in vectors.data]
    assert rows[0] == rows[1] != rows[2]
    assert len(rows[0]) == 64
    audio = client.audio.speech.create(model="tiny-speech", voice="high", input="Hi", response_format="wav")
    assert audio.content[:4] == b"RIFF"
    heard = client.audio.transcriptions.create(model="tiny-ears", file=("a.wav", audio.content))
    assert heard.text == "0.2 seconds of sound"
    text = client.audio.transcriptions.create(
        model="tiny-ears", file=("a.wav", audio.content), response_format="text"
    )
    assert text.strip() == "0.2 seconds of sound"


def counted(front: str, model: str) -> tuple[float, float]:
    """The prompt and completion tokens the front has counted for `model` (its metrics)."""
    lines = httpx.get(f"{front}/metrics").text.splitlines()
    found = dict.fromkeys(("prompt", "completion"), 0.0)
    for kind in found:
        head = f'modelport_tokens_total{{kind="{kind}",model="{model}"}} '
        found[kind] = sum(float(line.removeprefix(head)) for line in lines if line.startswith(head))
    return found["prompt"], found["completion"]


@pytest.mark.parametrize("asked", [False, True], ids=["usage not asked", "usage asked"])
@pytest.mark.parametrize("model", ["tiny-chat", "fine"], ids=["streamed", "whole upstream"])
def test_a_relayed_stream_is_counted_once_and_its_usage_comes_only_when_asked(
    front: str, model: str, asked: bool
) -> None:
    """Tokens are counted for every answer (the metrics, each project's usage and its limits): a stream is
    relayed asking its upstream for its usage whatever the client asked, and a client that did not ask is
    sent no usage, as OpenAI sends none; an upstream that answers whole (`fine`) is streamed and counted
    once."""
    before = counted(front, model)
    body = {"model": model, "messages": [{"role": "user", "content": "a b c d"}], "stream": True}
    if asked:
        body["stream_options"] = {"include_usage": True}
    with httpx.stream("POST", f"{front}/v1/chat/completions", json=body, timeout=30) as answer:
        lines = [line.removeprefix("data: ") for line in answer.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    said, used = ("d c b a", 4) if model == "tiny-chat" else ("fine", 1)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == said
    if asked:
        assert chunks[-1]["usage"]["completion_tokens"] == used
    else:
        assert all(c["choices"] and "usage" not in c for c in chunks)
    after = counted(front, model)
    assert (after[0] - before[0], after[1] - before[1]) == (used, used)


@pytest.mark.parametrize("model", list(STRICT))
def test_an_upstream_that_refuses_stream_options_streams_without_them(
    front: str, odd: tuple[Odd, str], model: str
) -> None:
    """`stream_options`, which this server adds to count a stream's tokens, is left out again for an
    upstream that refuses it (one more request, the first time only); where the client sent it, the
    upstream's refusal is the client's answer."""
    upstream, _ = odd
    body = {"model": model, "messages": [{"role": "user", "content": "a b"}], "stream": True}
    for _ in range(2):
        before = len(upstream.seen)
        with httpx.stream("POST", f"{front}/v1/chat/completions", json=body, timeout=30) as answer:
            assert answer.status_code == 200
            lines = [line.removeprefix("data: ") for line in answer.iter_lines() if line.startswith("data: ")]
        assert lines[-1] == "[DONE]"
        said = [json.loads(line)["choices"][0]["delta"].get("content") for line in lines[:-1]]
        assert "".join(piece or "" for piece in said) == "fine"
        sent = [seen[2] for seen in upstream.seen[before:]]
        assert "stream_options" not in sent[-1]
    assert len(sent) == 1  # the second stream was sent without them at once
    asked = ask(front, model, stream=True, stream_options={"include_usage": True})
    assert asked.status_code == STRICT[model][1]
    assert "stream_options" in asked.text


def test_discovery_serves_the_allowed_models_under_a_prefix(front: str) -> None:
    ids = {m.id for m in sdk(front).models.list()}
    assert {"tiny/reverse", "tiny/trigram"} <= ids
    assert not {"tiny/tones", "tiny/loudness"} & ids
    assert {"qwen2.5", "qwen3"} <= ids
    assert "llama3.2" not in ids
    assert "mistral" not in ids
    # The tiny upstream is a modelport: it says what each model serves.
    assert sdk(front).models.retrieve("tiny/trigram").model_extra["capabilities"] == ["embedding"]
    reply = sdk(front).chat.completions.create(
        model="tiny/reverse", messages=[{"role": "user", "content": "x y"}]
    )
    assert reply.choices[0].message.content == "y x"
    assert reply.model == "tiny/reverse"


def test_a_model_that_appears_upstream_is_found_on_the_next_refresh(front: str, odd: tuple[Odd, str]) -> None:
    upstream, _ = odd
    upstream.listing.append("qwen-new")
    try:
        time.sleep(0.6)
        assert "qwen-new" in {m.id for m in sdk(front).models.list()}
    finally:
        upstream.listing.remove("qwen-new")


def test_fields_beyond_openai_reach_the_upstream_with_its_key_and_the_request_id(
    front: str, odd: tuple[Odd, str]
) -> None:
    upstream, _ = odd
    before = len(upstream.seen)
    response = ask(
        front,
        "fine",
        guided_json={"type": "object"},
        options={"num_ctx": 4096},
        temperature=0.5,
    )
    assert response.status_code == 200
    assert response.json()["model"] == "fine"
    assert response.json()["choices"][0]["message"]["content"] == "fine"
    _, headers, body = upstream.seen[before]
    assert body["guided_json"] == {"type": "object"}
    assert body["options"] == {"num_ctx": 4096}
    assert body["temperature"] == 0.5
    assert body["model"] == "fine"
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["x-request-id"] == response.headers["x-request-id"]


@pytest.mark.slow
def test_a_hanging_replica_is_skipped_and_all_hanging_is_a_504(front: str) -> None:
    start = time.perf_counter()
    response = ask(front, "hang@a")
    assert response.status_code == 200  # a hung on one try at most; b answered
    assert time.perf_counter() - start < 3 * slack()
    response = ask(front, "hang")
    assert response.status_code == 504
    error = response.json()["error"]
    assert error["code"] == "upstream_timeout"
    assert "`hang`" in error["message"]
    assert "/a/v1" in error["message"]
    assert "/b/v1" in error["message"]


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ("html", "text/html"),
        ("notjson", "not JSON"),
        ("shape", "no `choices`"),
        ("crash", "CUDA out of memory"),
    ],
)
def test_a_bad_answer_is_a_502_naming_the_upstream(front: str, model: str, words: str) -> None:
    response = ask(front, model)
    assert response.status_code == 502
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "upstream_error"
    assert words in error["message"]
    assert "http://127.0.0.1:" in error["message"]
    assert KEY not in response.text


def test_a_429_goes_to_another_replica_or_back_with_its_retry_after(front: str) -> None:
    assert ask(front, "busy@b").status_code == 200
    response = ask(front, "busy")
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "busy"  # the upstream's own body
    assert 6 <= int(response.headers["retry-after"]) <= 7
    with pytest.raises(openai.RateLimitError):
        sdk(front).chat.completions.create(model="busy", messages=[{"role": "user", "content": "x"}])


def test_an_upstream_4xx_comes_back_as_it_was(front: str) -> None:
    response = ask(front, "unknown")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "model not found"
    response = ask(front, "teapot")
    assert response.status_code == 418
    error = response.json()["error"]
    assert "answered 418: no tea here" in error["message"]
    assert "/v1" in error["message"]


def test_a_stream_cut_short_ends_with_an_error_event_and_no_done(front: str) -> None:
    body = {"model": "cut", "messages": [{"role": "user", "content": "x"}], "stream": True}
    with httpx.stream("POST", f"{front}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert json.loads(data[0])["choices"][0]["delta"]["content"] == "Once"
    assert "[DONE]" not in data
    error = json.loads(data[-1])["error"]
    assert error["code"] == "upstream_error"
    assert "cut short" in error["message"]
    with pytest.raises(openai.APIError, match="cut short"):
        for _ in sdk(front).chat.completions.create(
            model="cut", messages=[{"role": "user", "content": "x"}], stream=True
        ):
            pass


def test_no_healthy_replica_is_a_503_with_retry_after_naming_the_model(front: str) -> None:
    response = ask(front, "nowhere")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "upstream_unavailable"
    assert "`nowhere`" in response.json()["error"]["message"]
    assert int(response.headers["retry-after"]) >= 1


def test_health_reports_each_replica_and_never_a_key(front: str) -> None:
    health = httpx.get(f"{front}/health").json()
    pools = {pool["name"]: pool["replicas"] for pool in health["upstreams"]}
    assert pools["nowhere"][0]["state"] == "down"
    assert "connection" in pools["nowhere"][0]["last_error"]
    assert pools["tiny-chat"][0]["state"] == "up"
    assert KEY not in json.dumps(health)
    scraped = httpx.get(f"{front}/metrics").text
    assert 'modelport_upstream_up{pool="nowhere",upstream="http://127.0.0.1:9/v1"} 0.0' in scraped
    assert "modelport_upstream_requests_total" in scraped
    assert KEY not in scraped


def test_the_in_process_client_serves_remote_models(tiny_upstream: str) -> None:
    settings = Settings(defaults=False, models=[remote("r", [tiny_upstream], upstream_model="reverse")])
    with modelport.OpenAI(settings=settings) as client:  # closed: its pool stops probing the upstream
        reply = client.chat.completions.create(model="r", messages=[{"role": "user", "content": "p q"}])
        assert reply.choices[0].message.content == "q p"
        stream = client.chat.completions.create(
            model="r", messages=[{"role": "user", "content": "p q"}], stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "q p"


def test_a_key_in_models_toml_is_refused() -> None:
    with pytest.raises(ValueError, match="api_key_env"):
        assemble.registry(
            Settings(defaults=False, models=[remote("k", ["http://127.0.0.1:1/v1"], api_key="sk-x")])
        )
    with pytest.raises(ValueError, match="not an http"):
        assemble.registry(Settings(defaults=False, models=[remote("k", ["ftp://x/v1"])]))


def test_more_requests_at_once_than_any_connection_cap_all_reach_the_upstream(front: str) -> None:
    async def crowd() -> list[int]:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=None)) as client:
            body = {"model": "crowd", "messages": [{"role": "user", "content": "x"}]}
            url = f"{front}/v1/chat/completions"
            answers = await asyncio.gather(*(client.post(url, json=body) for _ in range(CROWD)))
        return [answer.status_code for answer in answers]

    assert asyncio.run(crowd()) == [200] * CROWD


class Sleepy:
    """A keep-alive HTTP/1.1 upstream that resets a connection idle for `idle` seconds when a request
    arrives on it, as a server whose idle timer fires at that moment does (uvicorn's, Node's: 5 s)."""

    def __init__(self, idle: float) -> None:
        self.idle = idle
        self.resets = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError):  # the client closed it
            await self._answer(reader, writer)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answered = time.monotonic()
        while head := await reader.readuntil(b"\r\n\r\n"):
            lines = head.decode().split("\r\n")
            length = next(
                (int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length")), 0
            )
            await reader.readexactly(length)
            if time.monotonic() - answered >= self.idle:
                self.resets += 1
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.close()
                return
            listing = {"object": "list", "data": [{"id": "sleepy", "object": "model"}]}
            content = json.dumps(WHOLE if lines[0].startswith("POST") else listing).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(content)}\r\n\r\n".encode()
                + content
            )
            await writer.drain()
            answered = time.monotonic()


@pytest.mark.slow
def test_a_connection_the_upstream_is_about_to_close_is_never_sent_a_request() -> None:
    sleepy = Sleepy(idle=4.0)

    async def run() -> list[str | None]:
        server = await asyncio.start_server(sleepy.serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        model = remote("sleepy", [f"http://127.0.0.1:{port}/v1"], health_interval=3600)
        client = modelport.AsyncOpenAI(settings=Settings(defaults=False, models=[model]))
        said = []
        async with server:
            for pause in (0.0, 4.5, 0.5):
                await asyncio.sleep(pause)
                reply = await client.chat.completions.create(
                    model="sleepy", messages=[{"role": "user", "content": "x"}]
                )
                said.append(reply.choices[0].message.content)
            await client.close()
        return said

    assert asyncio.run(run()) == ["fine"] * 3
    assert sleepy.resets == 0
