"""A model served elsewhere that thinks: an upstream answering as vLLM, llama-server and DeepSeek's API do
(`reasoning_content` beside `content`, or vLLM's newer `reasoning`; `completion_tokens_details.
reasoning_tokens` in the usage). Chat passes the thinking on as it came; the Responses API makes it a
`reasoning` item with its events, its tokens counted, on both faces. The upstream's words are fixed, so
every field is checked exactly."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from modelport.settings import ModelConfig, Settings
from tests.support.faces import Faces, faces
from tests.support.live import serve_app
from tests.support.openresponses import EVENT, RESPONSE, problems

THOUGHT = ["The user wants", " a sum: 2 + 3."]
ANSWER = ["It is", " 5."]
USAGE = {
    "prompt_tokens": 12,
    "completion_tokens": 20,
    "total_tokens": 32,
    "completion_tokens_details": {"reasoning_tokens": 14},
}
FRAME = {"id": "up", "created": 1, "model": "thinker"}


async def chat(request: Request) -> Response:
    """vLLM's shape: thinking in `reasoning_content` (model `…-vllm11`: in `reasoning`), then the answer."""
    body = await request.json()
    field = "reasoning" if body["model"].endswith("vllm11") else "reasoning_content"
    if not body.get("stream"):
        message = {"role": "assistant", "content": "".join(ANSWER), field: "".join(THOUGHT)}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return JSONResponse({**FRAME, "object": "chat.completion", "choices": [choice], "usage": USAGE})

    async def events() -> AsyncIterator[bytes]:
        deltas = [{"role": "assistant", "content": None}]
        deltas += [{field: piece} for piece in THOUGHT] + [{"content": piece} for piece in ANSWER]
        for i, delta in enumerate(deltas):
            choice = {"index": 0, "delta": delta, "finish_reason": "stop" if i == len(deltas) - 1 else None}
            chunk = {**FRAME, "object": "chat.completion.chunk", "choices": [choice]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
        last = {**FRAME, "object": "chat.completion.chunk", "choices": [], "usage": USAGE}
        yield f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode()

    return StreamingResponse(events(), media_type="text/event-stream")


async def listing(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": "thinker", "object": "model"}]})


@pytest.fixture(scope="module")
def served() -> Iterator[Faces]:
    routes = [Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", listing)]
    with serve_app(Starlette(routes=routes)) as upstream:
        models = [
            ModelConfig.model_validate(
                {"id": name, "engine": "remote", "upstreams": [f"{upstream}/v1"], "upstream_model": name}
            )
            for name in ("thinker", "thinker-vllm11")
        ]
        with faces(Settings(defaults=False, models=models)) as both:
            yield both


@pytest.fixture(params=["http", "in-process"])
def sdk(request: pytest.FixtureRequest, served: Faces) -> openai.OpenAI:
    return served.face(request.param)


def test_chat_passes_the_upstreams_thinking_and_its_tokens_on(sdk: openai.OpenAI) -> None:
    reply = sdk.chat.completions.create(model="thinker", messages=[{"role": "user", "content": "2+3?"}])
    message = reply.choices[0].message
    assert (message.content, getattr(message, "reasoning_content", None)) == ("It is 5.", "".join(THOUGHT))
    assert reply.usage is not None
    assert reply.usage.completion_tokens_details is not None
    assert reply.usage.completion_tokens_details.reasoning_tokens == 14


@pytest.mark.parametrize("model", ["thinker", "thinker-vllm11"])
def test_responses_make_the_upstreams_thinking_a_reasoning_item(sdk: openai.OpenAI, model: str) -> None:
    raw = sdk.responses.with_raw_response.create(model=model, input="2+3?", reasoning={"summary": "auto"})
    assert problems(json.loads(raw.http_response.content), RESPONSE) == []
    response = raw.parse()
    reasoning, message = response.output
    assert reasoning.type == "reasoning"
    assert [(c.type, c.text) for c in reasoning.content or []] == [("reasoning_text", "".join(THOUGHT))]
    assert [s.text for s in reasoning.summary] == ["".join(THOUGHT)]
    assert message.type == "message"
    assert response.output_text == "It is 5."
    assert response.usage is not None
    assert response.usage.output_tokens_details.reasoning_tokens == 14


def test_a_streamed_response_opens_and_closes_the_reasoning_item_before_the_message(
    sdk: openai.OpenAI,
) -> None:
    with sdk.responses.with_streaming_response.create(model="thinker", input="2+3?", stream=True) as raw:
        events = [json.loads(line[6:]) for line in raw.iter_lines() if line.startswith("data: {")]
    for event in events:
        assert problems(event, EVENT) == [], event["type"]
    kinds = [e["type"] for e in events]
    first, closed = kinds.index("response.output_item.added"), kinds.index("response.output_item.done")
    assert kinds[first : closed + 1] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert [e["delta"] for e in events if e["type"] == "response.reasoning_text.delta"] == THOUGHT
    done = events[-1]
    assert done["type"] == "response.completed"
    assert [item["type"] for item in done["response"]["output"]] == ["reasoning", "message"]
    assert done["response"]["usage"]["output_tokens_details"]["reasoning_tokens"] == 14
    assert "response.reasoning_summary_part.added" not in kinds  # no summary was asked for


def test_sealed_reasoning_goes_out_and_comes_back(sdk: openai.OpenAI) -> None:
    first = sdk.responses.create(
        model="thinker", input="2+3?", store=False, include=["reasoning.encrypted_content"]
    )
    reasoning = first.output[0]
    assert reasoning.type == "reasoning"
    assert reasoning.encrypted_content
    assert "".join(THOUGHT) not in reasoning.encrypted_content
    given = [{"role": "user", "content": "2+3?"}, *[item.to_dict() for item in first.output]]
    again = sdk.responses.create(
        model="thinker", input=[*given, {"role": "user", "content": "And 4?"}], store=False
    )
    assert again.status == "completed"
    tampered = {**given[1], "encrypted_content": reasoning.encrypted_content[:-8] + "AAAAAAAA"}
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.responses.create(model="thinker", input=[given[0], tampered], store=False)
    assert refused.value.body["param"] == "input[1].encrypted_content"  # type: ignore[index]
