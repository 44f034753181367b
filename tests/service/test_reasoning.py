"""Models that think, and families' own formats, over SmolLM2's first blocks (`tests/support/families.py`): a
DeepSeek R1 distill's template (its prompt opens `<think>`), Qwen3's (`enable_thinking`), gpt-oss's harmony
(its markers special tokens of a re-packed vocabulary) and Qwen3-Coder's XML calls. The weights know none
of these formats; every check here is of what the format, the template and the grammar decide — where the
thinking goes, how it is counted and bounded, what a call looks like — never of the model's words."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from modelport.settings import ModelConfig, Settings
from tests.support.faces import Faces, faces
from tests.support.families import DIGITS, FIRST_BLOCKS, HARMONY_TOKENS, repack, template
from tests.support.openresponses import EVENT, RESPONSE, problems

pytestmark = pytest.mark.slow  # four models of their own

ASK = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "2 + 3?"}]
MARKERS = ("<think>", "</think>", "<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<tool_call>")
CLOSE_TOKENS = 4  # `</think>` in SmolLM2's vocabulary is at most this many tokens


def model(name: str, **options: Any) -> ModelConfig:
    return ModelConfig.model_validate(
        {"id": name, "engine": "llamacpp", "n_parallel": 1, "n_ctx_per_slot": 4096, **options}
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    folder = tmp_path_factory.mktemp("families")
    shallow = str(repack("smollm2", folder, layers=FIRST_BLOCKS))
    models = [
        model("r1", path=str(repack("deepseek-r1", folder, layers=FIRST_BLOCKS))),
        model("oss", path=str(repack("gpt-oss", folder, HARMONY_TOKENS, layers=FIRST_BLOCKS))),
        model("qwen3", path=shallow, chat_template=template("qwen3")),
        model("coder", path=shallow, chat_template=template("qwen3-coder")),
        ModelConfig.model_validate({"id": "thinking-voice", "engine": "realtime", "chat": "r1"}),
    ]
    # The default models beside them (loaded when used): a realtime pipeline chains them to a thinking model.
    with faces(Settings(models=models, preload=False)) as both:
        yield both


@pytest.fixture(params=["http", "in-process"])
def sdk(request: pytest.FixtureRequest, served: Faces) -> openai.OpenAI:
    return served.face(request.param)


def clean(text: str | None) -> None:
    """No marker of any family's format in what the user reads."""
    assert not any(marker in (text or "") for marker in MARKERS), text


def thought_tokens(usage: Any) -> int:
    assert usage.completion_tokens_details is not None
    return int(usage.completion_tokens_details.reasoning_tokens)


def test_thinking_is_kept_apart_from_the_answer_and_counted(sdk: openai.OpenAI) -> None:
    # Before: the thinking stayed in `content` (or llama.cpp's reading of it), uncounted.
    reply = sdk.chat.completions.create(model="r1", messages=ASK, max_tokens=120, temperature=0)
    message = reply.choices[0].message
    # Whether this model writes anything before closing the thinking its prompt opened is its own affair;
    # where the thinking goes, and that it is counted exactly when there is some, is the server's.
    thinking = getattr(message, "reasoning_content", None) or ""
    clean(thinking)
    clean(message.content)
    assert reply.usage is not None
    assert thought_tokens(reply.usage) <= reply.usage.completion_tokens
    assert (thought_tokens(reply.usage) > 0) == bool(thinking)


def test_a_streamed_answer_thinks_first_then_answers(sdk: openai.OpenAI) -> None:
    stream = sdk.chat.completions.create(
        model="r1", messages=ASK, max_tokens=120, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    order: list[str] = []
    usage = None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            if getattr(choice.delta, "reasoning_content", None):
                order.append("thinking")
            if choice.delta.content:
                clean(choice.delta.content)
                order.append("answer")
    if "answer" in order:  # once the answer begins, the thinking is over
        assert "thinking" not in order[order.index("answer") :]
    assert usage is not None
    # Every chunk of thinking is a token of it; its closing marker's tokens count too; none without thinking.
    assert order.count("thinking") <= thought_tokens(usage) <= usage.completion_tokens
    assert (thought_tokens(usage) > 0) == ("thinking" in order)


def test_a_thinking_model_calls_a_required_tool_within_its_budget(sdk: openai.OpenAI) -> None:
    # Before: the grammar forced `<tool_call>` while the model was still inside its thinking, so every call
    # was text in `reasoning_content` and the answer ran to `max_tokens`.
    reply = sdk.chat.completions.create(
        model="r1", messages=ASK, tools=[DIGITS], tool_choice="required", parallel_tool_calls=False,
        reasoning_effort="low", max_tokens=400, temperature=0,
    )  # fmt: skip
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    jsonschema.validate(json.loads(call.function.arguments), DIGITS["function"]["parameters"])
    assert reply.usage is not None
    # `low` of 400 tokens: a quarter, 100, and the closing marker the budget forces after them.
    assert thought_tokens(reply.usage) <= 100 + CLOSE_TOKENS


def test_effort_none_closes_a_thinking_the_prompt_opened(sdk: openai.OpenAI) -> None:
    reply = sdk.chat.completions.create(
        model="r1", messages=ASK, max_tokens=20, temperature=0, reasoning_effort="none"
    )
    assert not getattr(reply.choices[0].message, "reasoning_content", None)
    assert reply.usage is not None
    assert thought_tokens(reply.usage) == 0


def test_effort_reaches_the_template_in_the_variable_its_family_reads(served: Faces) -> None:
    def prompt_tokens(name: str, effort: str) -> int:
        reply = served.http.chat.completions.create(
            model=name,
            messages=ASK,
            max_tokens=1,
            reasoning_effort=effort,  # type: ignore[arg-type]
        )
        assert reply.usage is not None
        return reply.usage.prompt_tokens

    # Qwen3's `enable_thinking: false` writes an empty think block into the prompt; gpt-oss's system message
    # says `Reasoning: low` or `high`, each a token of its own.
    assert prompt_tokens("qwen3", "none") > prompt_tokens("qwen3", "low")
    assert prompt_tokens("oss", "low") == prompt_tokens("oss", "high")
    assert prompt_tokens("qwen3", "low") == prompt_tokens("qwen3", "high")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "asked",
    [{}, {"tools": [DIGITS]}, {"tools": [DIGITS], "tool_choice": "required"}, {"reasoning_effort": "none"}],
    ids=["plain", "tools", "required", "none"],
)
def test_harmony_is_answered_in_its_channels_never_a_500(
    sdk: openai.OpenAI, asked: dict[str, Any], stream: bool
) -> None:
    # Before: llama.cpp's harmony parser refused the model's text: a 500 on every request.
    body = {"model": "oss", "messages": ASK, "max_tokens": 60, "temperature": 0, **asked}
    if not stream:
        reply = sdk.chat.completions.create(**body)
        message = reply.choices[0].message
        clean(message.content)
        clean(getattr(message, "reasoning_content", None))
        calls = message.tool_calls or []
        finish = reply.choices[0].finish_reason
    else:
        calls_seen: dict[int, list[str]] = {}
        finish = None
        for chunk in sdk.chat.completions.create(**body, stream=True):
            for choice in chunk.choices:
                clean(choice.delta.content)
                finish = choice.finish_reason or finish
                for piece in choice.delta.tool_calls or []:
                    entry = calls_seen.setdefault(piece.index, ["", ""])
                    entry[0] += (piece.function and piece.function.name) or ""
                    entry[1] += (piece.function and piece.function.arguments) or ""
        calls = [
            openai.types.chat.ChatCompletionMessageFunctionToolCall.model_validate(
                {"id": "x", "type": "function", "function": {"name": n, "arguments": a}}
            )
            for n, a in calls_seen.values()
        ]
    if asked.get("tool_choice") == "required":
        (call,) = calls  # harmony makes one call a turn
        assert call.function.name == "add"
        jsonschema.validate(json.loads(call.function.arguments), DIGITS["function"]["parameters"])
        assert finish == "tool_calls"
    if "tools" not in asked:
        assert not calls


def test_a_call_syntax_llama_cpp_knows_and_modelport_did_not(sdk: openai.OpenAI) -> None:
    # Qwen3-Coder's XML calls: before, its template's tools were refused as no format modelport knew.
    reply = sdk.chat.completions.create(
        model="coder", messages=ASK, tools=[DIGITS], tool_choice="required", parallel_tool_calls=False,
        max_tokens=80, temperature=0,
    )  # fmt: skip
    (call,) = reply.choices[0].message.tool_calls or []
    assert call.function.name == "add"
    jsonschema.validate(json.loads(call.function.arguments), DIGITS["function"]["parameters"])
    assert reply.choices[0].finish_reason == "tool_calls"


def test_each_model_says_its_format(served: Faces) -> None:
    for name, says in [("r1", "<think>…</think>, opened by the prompt"), ("oss", "harmony calls"),
                       ("qwen3", "steered by enable_thinking"), ("coder", "qwen3_xml calls")]:  # fmt: skip
        served.http.chat.completions.create(model=name, messages=ASK, max_tokens=1)  # loaded
        listed = httpx.get(f"{served.url}/v1/models/{name}", timeout=30).json()
        assert says in listed["chat_format"], listed


def test_a_response_of_a_thinking_model_has_its_reasoning_item(sdk: openai.OpenAI, served: Faces) -> None:
    # Before: the output was `[]` (the answer vanished, `incomplete`), reasoning tokens 0.
    raw = sdk.responses.with_raw_response.create(model="r1", input="2 + 3?", max_output_tokens=120)
    assert problems(json.loads(raw.http_response.content), RESPONSE) == []
    response = raw.parse()
    kinds = [item.type for item in response.output]
    assert response.usage is not None
    thought = response.usage.output_tokens_details.reasoning_tokens
    # A reasoning item first exactly when the model thought (whether it did is its own affair; the exact
    # item, from an upstream that always thinks, is test_relayed_reasoning's), and never one elsewhere.
    assert kinds.count("reasoning") == (1 if thought else 0)
    assert set(kinds) <= {"reasoning", "message"}
    if thought:
        reasoning = response.output[0]
        assert reasoning.type == "reasoning"
        assert [part.type for part in reasoning.content or []] == ["reasoning_text"]
        assert reasoning.summary == []  # none was asked for


def test_a_streamed_response_streams_its_reasoning_and_summary(sdk: openai.OpenAI) -> None:
    with sdk.responses.with_streaming_response.create(
        model="r1", input="2 + 3?", max_output_tokens=60, stream=True, reasoning={"summary": "auto"}
    ) as raw:
        events = [json.loads(line[6:]) for line in raw.iter_lines() if line.startswith("data: {")]
    for event in events:
        assert problems(event, EVENT) == [], event["type"]
    kinds = [e["type"] for e in events]
    done = events[-1]["response"]
    thought = done["usage"]["output_tokens_details"]["reasoning_tokens"]
    assert ("response.reasoning_text.delta" in kinds) == (thought > 0)
    if thought:  # the model thought (its own affair): the item comes first, its summary the thinking itself
        assert kinds.index("response.reasoning_text.delta") < kinds.index("response.reasoning_text.done")
        text = next(e["text"] for e in events if e["type"] == "response.reasoning_text.done")
        summary = next(e["text"] for e in events if e["type"] == "response.reasoning_summary_text.done")
        assert summary == text  # no second model summarises it
        assert done["output"][0]["type"] == "reasoning"


def test_reasoning_given_back_reaches_a_template_that_reads_it(served: Faces) -> None:
    # gpt-oss's template gives back the analysis of a turn that called a tool: it is in the prompt.
    turn: list[dict[str, Any]] = [
        {"role": "user", "content": "2 + 3?"},
        {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 2, "b": 3}'},
        {"type": "function_call_output", "call_id": "c1", "output": "5"},
    ]
    thought = {
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "Use add."}],
    }

    def counted(items: list[dict[str, Any]]) -> int:
        tool = {"type": "function", **DIGITS["function"]}  # the Responses API's flat shape
        return served.http.responses.input_tokens.count(model="oss", input=items, tools=[tool]).input_tokens

    assert counted([turn[0], thought, *turn[1:]]) > counted(turn)


def test_a_realtime_response_over_a_thinking_model_says_only_its_answer(served: Faces) -> None:
    async def run() -> tuple[str, Any]:
        client = openai.AsyncOpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0)
        async with client.realtime.connect(model="thinking-voice") as connection:
            session = {"type": "realtime", "output_modalities": ["text"], "max_output_tokens": 80}
            await connection.session.update(session=session)  # type: ignore[arg-type]
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "2 + 3?"}]}
            await connection.conversation.item.create(item=item)  # type: ignore[arg-type]
            await connection.response.create()
            said = ""
            async for event in connection:
                if event.type == "response.output_text.delta":
                    said += event.delta
                if event.type == "response.done":
                    return said, event.response
        raise AssertionError("the session ended before its response")

    said, response = asyncio.run(run())
    clean(said)
    assert response.output[0].content[0].text == said  # what was said is the answer's text, and only that


def test_continuing_an_assistant_message_of_a_model_read_in_its_format_is_a_400(sdk: openai.OpenAI) -> None:
    # llama.cpp renders no continuation of a message it hands over raw: refused by name, not answered wrongly.
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.chat.completions.create(
            model="qwen3", messages=[*ASK, {"role": "assistant", "content": "It is"}], max_tokens=4
        )
    assert refused.value.body["param"] == "messages[2]"  # type: ignore[index]
