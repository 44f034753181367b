"""`POST /generate`, vLLM's original demo endpoint, driven by its own example client (the functions of
vLLM's first `examples/api_client.py`, verbatim: `requests`, frames split on NUL)."""

from __future__ import annotations

import itertools
import json
from typing import Iterable, List  # noqa: UP035 (the client's own imports, kept as it wrote them)

import httpx
import pytest
import requests

from tests.support.faces import Faces


# --- vLLM's example client, as its design document shows it -------------------------------------------
def post_http_request(prompt: str, api_url: str, n: int = 1, stream: bool = False) -> requests.Response:
    headers = {"User-Agent": "Test Client"}
    pload = {
        "prompt": prompt,
        "n": n,
        "use_beam_search": True,
        "temperature": 0.0,
        "max_tokens": 16,
        "stream": stream,
    }
    response = requests.post(api_url, headers=headers, json=pload, stream=True)
    return response


def get_streaming_response(response: requests.Response) -> Iterable[List[str]]:  # noqa: UP006
    for chunk in response.iter_lines(chunk_size=8192, decode_unicode=False, delimiter=b"\0"):
        if chunk:
            data = json.loads(chunk.decode("utf-8"))
            output = data["text"]
            yield output


def get_response(response: requests.Response) -> List[str]:  # noqa: UP006
    data = json.loads(response.content)
    output = data["text"]
    return output


# -------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_example_client_gets_four_beams(server: Faces) -> None:
    prompt = "San Francisco is a"
    beams = get_response(post_http_request(prompt, f"{server.url}/generate", n=4))
    assert len(beams) == 4
    assert all(beam.startswith(prompt) and len(beam) > len(prompt) for beam in beams)
    assert len(set(beams)) == 4
    frames = list(
        get_streaming_response(post_http_request(prompt, f"{server.url}/generate", n=4, stream=True))
    )
    assert len(frames) == 1  # beam search answers at its end, in one frame
    assert len(frames[0]) == 4
    assert all(beam.startswith(prompt) for beam in frames[0])


def test_a_sampled_stream_grows_frame_by_frame(server: Faces) -> None:
    body = {
        "prompt": "Once upon a time",
        "n": 2,
        "max_tokens": 12,
        "temperature": 0.8,
        "seed": 4,
        "stream": True,
    }
    response = requests.post(f"{server.url}/generate", json=body, stream=True, timeout=60)
    frames = list(get_streaming_response(response))
    assert len(frames) > 3
    for before, after in itertools.pairwise(frames):
        assert all(a.startswith(b) for a, b in zip(after, before, strict=True))
    whole = requests.post(f"{server.url}/generate", json={**body, "stream": False}, timeout=60).json()
    assert whole["text"] == frames[-1]  # seeded: the same outputs whole


def test_messages_go_through_the_models_chat_template(server: Faces) -> None:
    body = {
        "model": "smollm2-135m-instruct",
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Say hi."},
        ],
        "max_tokens": 8,
        "temperature": 0,
    }
    (text,) = requests.post(f"{server.url}/generate", json=body, timeout=60).json()["text"]
    rendered = (
        "<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\nSay hi.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert text.startswith(rendered)
    assert len(text) > len(rendered)
    assert "<|im_end|>" not in text[len(rendered) :]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": "x", "beam_width": 3}, "beam_width"),
        ({"prompt": "x", "messages": [{"role": "user", "content": "y"}]}, "prompt"),
        ({"max_tokens": 4}, "prompt"),
        ({"prompt": "x", "top_k": -7}, "top_k"),
        ({"prompt": "x", "model": "no-such-model"}, "model"),
    ],
)
def test_bad_requests_are_400s_naming_the_field(server: Faces, body: dict[str, object], param: str) -> None:
    response = httpx.post(f"{server.url}/generate", json=body, timeout=30)
    assert response.status_code in (400, 404)
    assert response.json()["error"]["param"] == param
