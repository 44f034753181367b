"""What only the HTTP face does: routes and prefixes, SSE framing, raw error bodies, health, OpenAPI."""

from __future__ import annotations

import json
import re

import httpx
import openai
import pytest

from tests.support.faces import Faces
from tests.support.wav import wav


def test_both_prefixes_serve_the_api(server: Faces) -> None:
    for prefix in ("/v1", "/v1/openai/v1"):
        client = openai.OpenAI(base_url=f"{server.url}{prefix}", api_key="x", max_retries=0)
        assert {m.id for m in client.models.list()} == {
            "smollm2-135m-instruct",
            "all-minilm-l6-v2",
            "piper-en-us",
            "whisper-tiny-en",
            "espeak-ng",
            "whisper-base",
            "realtime",  # the default realtime pipeline
        }


def test_retrieve_resolves_an_alias_and_404s_an_unknown_model(http_client: openai.OpenAI) -> None:
    assert http_client.models.retrieve("whisper-1").id == "whisper-tiny-en"
    with pytest.raises(openai.NotFoundError) as caught:
        http_client.models.retrieve("nope")
    assert caught.value.code == "model_not_found"


def test_sse_frames_end_with_done(server: Faces) -> None:
    body = {
        "model": "smollm2-135m-instruct",
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 3,
        "stream": True,
    }
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        data = [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    assert all(json.loads(d)["object"] == "chat.completion.chunk" for d in data[:-1])


def _error(response: httpx.Response) -> dict[str, object]:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]  # type: ignore[no-any-return]


def test_a_whole_completion_carries_what_openai_requires_and_no_null_it_does_not(server: Faces) -> None:
    """A whole chat or legacy completion as OpenAI's reference has it: `logprobs`, `content` and `refusal`
    present (null here), no optional field written as null (the SDK's types add `audio`, `function_call`,
    `moderation`, … which were all `null` on the wire); a transcription without `languages`, `logprobs` or
    `words` it was not asked for."""
    asked = {"model": "smollm2-135m-instruct", "max_tokens": 2}
    chat = httpx.post(
        f"{server.url}/v1/chat/completions", json={**asked, "messages": [{"role": "user", "content": "Hi"}]}
    ).json()
    legacy = httpx.post(f"{server.url}/v1/completions", json={**asked, "prompt": "Hi"}).json()
    (choice,) = chat["choices"]
    assert set(choice) == {"index", "message", "logprobs", "finish_reason"}
    assert set(choice["message"]) == {"role", "content", "refusal"}
    assert choice["logprobs"] is choice["message"]["refusal"] is None
    assert set(legacy["choices"][0]) == {"index", "text", "logprobs", "finish_reason"}

    def nulls(value: object, where: str) -> list[str]:
        if isinstance(value, dict):
            return [n for k, v in value.items() for n in nulls(v, f"{where}.{k}")]
        if isinstance(value, list):
            return [n for i, v in enumerate(value) for n in nulls(v, f"{where}[{i}]")]
        return [where] if value is None else []

    assert nulls(chat, "") == [".choices[0].logprobs", ".choices[0].message.refusal"]
    assert nulls(legacy, "") == [".choices[0].logprobs"]
    silence = wav(bytes(32000), 16000)
    for form in ("json", "verbose_json"):
        heard = httpx.post(
            f"{server.url}/v1/audio/transcriptions",
            files={"file": ("quiet.wav", silence)},
            data={"model": "whisper-1", "response_format": form},
        )
        assert nulls(heard.json(), "") == []


def test_malformed_json_is_a_400_in_openai_shape(server: Faces) -> None:
    response = httpx.post(
        f"{server.url}/v1/chat/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert _error(response)["type"] == "invalid_request_error"


def test_missing_and_wrongly_typed_fields_name_the_parameter(server: Faces) -> None:
    missing = httpx.post(f"{server.url}/v1/embeddings", json={"model": "all-minilm-l6-v2"})
    assert missing.status_code == 400
    assert _error(missing)["param"] == "input"
    wrong = httpx.post(f"{server.url}/v1/chat/completions", json={"model": "x", "messages": "hello"})
    assert wrong.status_code == 400
    assert _error(wrong)["param"] == "messages"


def test_an_unknown_route_is_an_openai_shaped_404_naming_method_and_path(server: Faces) -> None:
    response = httpx.get(f"{server.url}/v1/nothing-here")
    assert response.status_code == 404
    assert "GET /v1/nothing-here" in _error(response)["message"]


def test_an_endpoint_modelport_lacks_is_named_to_the_sdk(http_client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        http_client.fine_tuning.jobs.create(model="smollm2-135m-instruct", training_file="file-x")
    assert "POST /v1/fine_tuning/jobs" in caught.value.message


def test_a_wrong_method_is_a_405_naming_the_allowed_one(server: Faces) -> None:
    response = httpx.get(f"{server.url}/v1/embeddings")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    message = _error(response)["message"]
    assert "GET /v1/embeddings" in message
    assert "POST" in message


def test_transcription_without_a_file_is_a_400(server: Faces) -> None:
    response = httpx.post(f"{server.url}/v1/audio/transcriptions", data={"model": "whisper-1"})
    assert response.status_code == 400
    assert _error(response)["param"] == "file"


def test_speech_has_the_content_type_of_its_format(server: Faces) -> None:
    for fmt, media_type in (("wav", "audio/wav"), ("pcm", "audio/pcm")):
        response = httpx.post(
            f"{server.url}/v1/audio/speech",
            json={"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": fmt},
            timeout=60,
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == media_type


def test_health_and_openapi(server: Faces) -> None:
    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "ok"
    assert health["store"]["state"] == "up"
    document = httpx.get(f"{server.url}/openapi.json").json()
    named = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(document)))
    assert named <= set(document["components"]["schemas"])  # no reference dangles
    paths = document["paths"]
    for path in (
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/audio/speech",
        "/v1/responses",
    ):
        assert "post" in paths[path]
    assert "get" in paths["/v1/chat/completions"]


def test_a_disconnected_stream_frees_its_slot(server: Faces) -> None:
    body = {
        "model": "smollm2-135m-instruct",
        "messages": [{"role": "user", "content": "Count from one to one thousand."}],
        "max_tokens": 2000,
        "stream": True,
        "n": 1,
    }
    # Eight slots: open and abandon more streams than that; if slots leaked, the last request would hang.
    for _ in range(10):
        with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    break
    reply = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={**body, "max_tokens": 2, "stream": False},
        timeout=30,
    )
    assert reply.status_code == 200
