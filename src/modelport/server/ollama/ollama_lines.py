"""Answers in Ollama's shapes: a whole chat or generation as one object, or a stream as NDJSON lines, one
object a line, the last with `done: true`, the stop reason and the counts (durations in nanoseconds, as
Ollama gives them). Tool calls come whole, their arguments an object; log-probabilities, where asked, with
the text of their tokens."""

from __future__ import annotations

import datetime
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from ollama import ChatResponse, GenerateResponse, Message
from ollama._types import Logprob, TokenLogprob  # the answers' own types, which `ollama` does not re-export
from pydantic import BaseModel

from modelport.errors import ModelportError
from modelport.protocol.answers import Events
from modelport.protocol.chunk_folds import thinking_of
from modelport.protocol.validation import json_value
from modelport.server.error_shapes import ollama_error

# What runs once an answer is made (a request's `keep_alive` applied).
After = Callable[[], Awaitable[None]]


def line(answer: BaseModel) -> bytes:
    """One object of a stream."""
    return answer.model_dump_json(exclude_none=True, by_alias=True).encode() + b"\n"


async def chat_whole(answer: Events[Any], model: str, started: float) -> ChatResponse:
    """A whole chat answer, its stream read to the end (to a request begun at `started`): Ollama's durations
    split at the first token, which only a stream tells."""
    reading = _Reading(model, started)
    text, thinking = await reading.whole(answer)
    calls = reading.tool_calls() or None
    message = Message(role="assistant", content=text, thinking=thinking or None, tool_calls=calls)
    return ChatResponse(message=message, logprobs=reading.logprobs or None, **reading.done())


async def generate_whole(answer: Events[Any], model: str, started: float) -> GenerateResponse:
    """A whole generation (of a chat or a raw completion), its stream read to the end."""
    reading = _Reading(model, started)
    text, thinking = await reading.whole(answer)
    logprobs = reading.logprobs or None
    return GenerateResponse(response=text, thinking=thinking or None, logprobs=logprobs, **reading.done())


def empty() -> Message:
    """The assistant's message with nothing in it (the last line's, a load's)."""
    return Message(role="assistant", content="")


def now() -> str:
    """Ollama's `created_at`."""
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


def nanoseconds(since: float) -> int:
    """The time since `since` (monotonic seconds), as Ollama counts durations."""
    return int((time.monotonic() - since) * 1e9)


def tool_call(name: str, arguments: str) -> Message.ToolCall:
    try:
        parsed = json_value(arguments or "{}")
    except ValueError:
        parsed = {}
    return Message.ToolCall(
        function=Message.ToolCall.Function(name=name, arguments=parsed if isinstance(parsed, dict) else {})
    )


def _done(
    model: str, finish: str | None, usage: Any, started: float, first: float | None = None
) -> dict[str, Any]:
    """The fields of the last object: why it stopped and what it counted."""
    ended = time.monotonic()
    first = first or ended
    return {
        "model": model,
        "created_at": now(),
        "done": True,
        "done_reason": "length" if finish == "length" else "stop",
        "prompt_eval_count": getattr(usage, "prompt_tokens", None) if usage is not None else None,
        "eval_count": getattr(usage, "completion_tokens", None) if usage is not None else None,
        "total_duration": int((ended - started) * 1e9),
        "prompt_eval_duration": int((first - started) * 1e9),
        "eval_duration": int((ended - first) * 1e9),
    }


def _logprobs(choice: dict[str, Any]) -> list[Logprob]:
    """A chunk's log-probabilities as Ollama gives them: a chat's (`content`, each token with its
    alternatives) or a completion's (`tokens`, `token_logprobs`, `top_logprobs`)."""
    given = choice.get("logprobs")
    if not isinstance(given, dict):
        return []
    if "content" in given:
        return [
            Logprob(
                token=token["token"],
                logprob=token["logprob"],
                top_logprobs=[TokenLogprob(token=t["token"], logprob=t["logprob"]) for t in top] or None,
            )
            for token in given.get("content") or ()
            for top in [token.get("top_logprobs") or ()]
        ]
    tokens, tops = given.get("tokens") or [], given.get("top_logprobs") or []
    tops = [*tops, *[None] * (len(tokens) - len(tops))]  # none asked: no alternatives
    return [
        Logprob(
            token=token,
            logprob=logprob,
            top_logprobs=[TokenLogprob(token=t, logprob=p) for t, p in (top or {}).items()] or None,
        )
        for token, logprob, top in zip(tokens, given.get("token_logprobs") or [], tops, strict=False)
    ]


class _Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Reading:
    """A stream of chunks as it is read: its text and thinking piece by piece, and what the last line says
    (the model, the usage, why it stopped, when the first token came), and the calls, held until whole."""

    def __init__(self, model: str, started: float) -> None:
        self.model = model
        self.started = started
        self.first: float | None = None  # when the first token came
        self.finish: str | None = None
        self.usage = _Usage()
        self.calls: dict[int, dict[str, str]] = {}
        self.logprobs: list[Logprob] = []  # every token's, where asked
        self._told = 0  # how many of them a piece has carried

    def fresh_logprobs(self) -> list[Logprob] | None:
        """The log-probabilities of the tokens read since the last piece was told (None: none)."""
        fresh, self._told = self.logprobs[self._told :], len(self.logprobs)
        return fresh or None

    async def pieces(self, answer: Events[Any]) -> AsyncGenerator[tuple[str, str | None], None]:
        """(text, thinking) as they come; their tokens' log-probabilities in `fresh_logprobs`."""
        async for chunk in answer.items:
            self.model = str(chunk.get("model") or self.model)
            if chunk.get("usage"):
                self.usage = _Usage.model_validate(chunk["usage"])
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                if delta.get("tool_calls"):
                    self.first = self.first or time.monotonic()
                for call in delta.get("tool_calls") or ():
                    held = self.calls.setdefault(call.get("index", 0), {"name": "", "arguments": ""})
                    function = call.get("function") or {}
                    held["name"] += function.get("name") or ""
                    held["arguments"] += function.get("arguments") or ""
                self.logprobs += _logprobs(choice)
                text = choice.get("text") if "text" in choice else delta.get("content")  # a completion's
                thought = thinking_of(delta)
                if text or thought:
                    self.first = self.first or time.monotonic()
                    yield text or "", thought or None
                self.finish = choice.get("finish_reason") or self.finish

    async def whole(self, answer: Events[Any]) -> tuple[str, str]:
        """The text and the thinking, each whole."""
        texts, thoughts = [], []
        try:
            async for text, thought in self.pieces(answer):
                texts.append(text)
                thoughts.append(thought or "")
        finally:
            await answer.aclose()
        return "".join(texts), "".join(thoughts)

    def tool_calls(self) -> list[Message.ToolCall]:
        return [tool_call(c["name"], c["arguments"]) for _, c in sorted(self.calls.items())]

    def done(self) -> dict[str, Any]:
        return _done(self.model, self.finish, self.usage, self.started, self.first)


async def chat_lines(
    answer: Events[Any], model: str, started: float, after: After
) -> AsyncGenerator[bytes, None]:
    """A streamed chat as Ollama's lines: text and thinking as they come, the calls (each whole once its
    arguments are), then the last line."""
    reading = _Reading(model, started)
    try:
        async for text, thought in reading.pieces(answer):
            said = Message(role="assistant", content=text, thinking=thought)
            logprobs = reading.fresh_logprobs()
            piece = ChatResponse(
                model=reading.model, created_at=now(), message=said, logprobs=logprobs, done=False
            )
            yield line(piece)
        if reading.calls:
            said = Message(role="assistant", content="", tool_calls=reading.tool_calls())
            yield line(ChatResponse(model=reading.model, created_at=now(), message=said, done=False))
        await after()
        yield line(ChatResponse(message=empty(), **reading.done()))
    except ModelportError as error:
        yield ollama_error(error) + b"\n"
    finally:
        await answer.aclose()


async def generate_lines(
    answer: Events[Any], model: str, started: float, after: After
) -> AsyncGenerator[bytes, None]:
    """A streamed generation (of a chat or a raw completion) as Ollama's lines."""
    reading = _Reading(model, started)
    try:
        async for text, thought in reading.pieces(answer):
            piece = GenerateResponse(
                model=reading.model,
                created_at=now(),
                response=text,
                thinking=thought,
                logprobs=reading.fresh_logprobs(),
                done=False,
            )
            yield line(piece)
        await after()
        yield line(GenerateResponse(response="", **reading.done()))
    except ModelportError as error:
        yield ollama_error(error) + b"\n"
    finally:
        await answer.aclose()
