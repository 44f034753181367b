"""The one accumulator, on its own: deltas merged as openai-python merges them (but list entries found by
their `index`), chat and legacy completion chunks folded into their whole answer, and the whole answer
streamed back as chunks; the pieces of one chunk merged the same way by the tool-call stream parser."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from openai.types.chat import ChatCompletion

from modelport.protocol.answers import listed
from modelport.protocol.chunk_folds import ChatFold, CompletionFold, chunks_of, merge_delta
from modelport.service.generation.formats.json_answer import AnswerParser
from modelport.service.generation.formats.reading import read
from modelport.service.generation.tools.plan import ToolPlan

HEAD = {"id": "chatcmpl-1", "created": 1, "model": "m", "object": "chat.completion.chunk"}


def chunk(delta: dict[str, Any], index: int = 0, **more: Any) -> dict[str, Any]:
    return {**HEAD, "choices": [{"index": index, "delta": delta, **more}]}


def token(text: str, logprob: float) -> dict[str, Any]:
    return {"token": text, "logprob": logprob, "bytes": None, "top_logprobs": []}


def test_strings_join_objects_merge_and_names_are_replaced() -> None:
    acc: dict[str, Any] = {}
    merge_delta(acc, {"role": "assistant", "content": "He"})
    merge_delta(acc, {"role": "assistant", "content": "llo", "refusal": None})  # Ollama repeats the role
    merge_delta(acc, {"function_call": {"name": "f", "arguments": '{"a"'}})
    merge_delta(acc, {"function_call": {"arguments": ": 1}"}})
    assert acc == {
        "role": "assistant",
        "content": "Hello",
        "function_call": {"name": "f", "arguments": '{"a": 1}'},
    }


def test_indexed_entries_merge_by_their_index_not_their_place() -> None:
    # The pieces of one chunk may continue call 2 and begin call 3: entry positions are not indexes.
    acc: dict[str, Any] = {}
    merge_delta(acc, {"tool_calls": [{"index": 2, "function": {"arguments": '{"x": '}}]})
    merge_delta(acc, {"tool_calls": [{"index": 3, "id": "c3", "function": {"name": "g", "arguments": ""}}]})
    merge_delta(acc, {"tool_calls": [{"index": 2, "function": {"arguments": "1}"}}]})
    assert acc["tool_calls"] == [
        {"index": 2, "function": {"arguments": '{"x": 1}'}},
        {"index": 3, "id": "c3", "function": {"name": "g", "arguments": ""}},
    ]


def test_unindexed_lists_are_extended_and_deltas_are_not_shared() -> None:
    first = {"content": [{"token": "a", "logprob": -0.1}]}
    acc = merge_delta({}, first)
    merge_delta(acc, {"content": [{"token": "b", "logprob": -0.2}]})
    assert [e["token"] for e in acc["content"]] == ["a", "b"]
    assert first == {"content": [{"token": "a", "logprob": -0.1}]}  # a chunk already sent stays as it was


def test_chat_chunks_fold_into_the_whole_completion() -> None:
    fold = ChatFold()
    for piece in [
        chunk({"role": "assistant", "content": None}),
        chunk({"content": "Let me "}, logprobs={"content": [token("Let", -1.0)]}),
        chunk({"content": "add."}, logprobs={"content": [token("add", -2.0)]}),
        chunk(
            {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "add"}}]}
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]}),
        chunk({}, finish_reason="tool_calls"),
        {**HEAD, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}},
    ]:
        fold.add(piece)
    whole = ChatCompletion.model_validate(fold.whole())
    choice = whole.choices[0]
    assert choice.message.content == "Let me add."
    assert choice.finish_reason == "tool_calls"
    assert choice.logprobs is not None
    assert [t.token for t in choice.logprobs.content or []] == ["Let", "add"]
    (call,) = choice.message.tool_calls or []
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "add", '{"a": 1}')
    assert "index" not in fold.whole()["choices"][0]["message"]["tool_calls"][0]  # not part of a whole call
    assert whole.usage is not None
    assert whole.usage.total_tokens == 8


FUNCTION = {"name": "f", "arguments": "{}"}


def test_a_whole_completion_streamed_back_folds_into_itself() -> None:
    whole = {
        "id": "chatcmpl-2",
        "created": 2,
        "model": "m",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
                "logprobs": None,
                "finish_reason": "tool_calls",
            },
            {
                "index": 1,
                "message": {"role": "assistant", "content": "hi", "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            },
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }
    fold = ChatFold()
    for piece in chunks_of(whole):
        fold.add(piece)
    assert fold.whole() == whole


def test_legacy_chunks_fold_with_their_parallel_logprobs() -> None:
    fold = CompletionFold()
    for text, token, offset in (("Once", "Once", 0), (" upon", " upon", 4)):
        logprobs = {
            "tokens": [token],
            "token_logprobs": [-1.0],
            "top_logprobs": [{token: -1.0}],
            "text_offset": [offset],
        }
        fold.add(
            {
                **HEAD,
                "object": "text_completion",
                "choices": [{"index": 0, "text": text, "logprobs": logprobs}],
            }
        )
    fold.add({**HEAD, "choices": [{"index": 0, "text": "", "finish_reason": "length"}]})
    (choice,) = fold.whole()["choices"]
    assert (choice["text"], choice["finish_reason"]) == ("Once upon", "length")
    assert choice["logprobs"]["tokens"] == ["Once", " upon"]
    assert choice["logprobs"]["text_offset"] == [0, 4]


def test_the_tool_call_parser_merges_the_pieces_of_one_chunk() -> None:
    plan = ToolPlan(tools=[{"name": "add", "parameters": {}}], required=True, parallel=True, legacy=False)
    answer = (
        '{"tool_calls": [{"name": "add", "arguments": {"a": 1}}, {"name": "add", "arguments": {"b": 2}}]}'
    )

    async def run() -> list[dict[str, Any]]:
        chunks: AsyncGenerator[dict[str, Any], None] = listed(
            [chunk({"content": answer}, finish_reason="stop")]
        )
        return [c async for c in read(chunks, lambda: AnswerParser(plan.legacy))]

    (out,) = asyncio.run(run())
    calls = out["choices"][0]["delta"]["tool_calls"]
    # One delta per call, each whole: its id, its name and its arguments joined.
    assert [(c["index"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        (0, "add", '{"a":1}'),
        (1, "add", '{"b":2}'),
    ]
    assert out["choices"][0]["finish_reason"] == "tool_calls"
