"""Chat answers spoken (`modalities: ["audio"]`, as `gpt-4o-audio-preview` takes them): the chat model's
text is said by the server's speech model, clause by clause as the text streams, and returned as
`message.audio` (`id`, `data`, `transcript`, `expires_at`) or as `delta.audio` pieces. An answer's
transcript is remembered for an hour under its audio id, in its project, so a later turn may name the
assistant's audio by `audio.id` instead of repeating it.

Streamed, the transcript goes out as the text comes and each clause's audio as soon as it is spoken; the
`id` is in the first audio piece of a choice and `expires_at` alone in its last, and each piece's base64
`data` holds a whole number of 16-bit samples and of 3-byte groups, so the pieces' `data` joined is the
whole audio (clients join them, as they do OpenAI's).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import numpy as np
from openai.types.chat import ChatCompletion, ChatCompletionAudio

from modelport import context
from modelport.errors import InvalidRequestError
from modelport.ids import new_id
from modelport.protocol.requests import ChatAudio, ChatCompletionRequest
from modelport.service import calls
from modelport.service.audio import codec
from modelport.service.audio.clauses import Clauses
from modelport.service.audio.speech import OPENAI_VOICES, split_sentences

# Text → raw 16-bit PCM, mono at 24 kHz, in a voice.
Speak = Callable[[str, str], Awaitable[bytes]]

LIFETIME = 3600  # seconds an answer's audio id can be named by a later turn
_REMEMBERED = 10_000  # audio ids kept at most (transcripts only, oldest forgotten first)
_ALIGN = 6  # bytes: whole 16-bit samples and whole base64 groups in every piece


class SpokenAnswers:
    """Speaks chat answers, and remembers their transcripts for later turns."""

    def __init__(self, speak: Speak) -> None:
        self.speak = speak
        self._transcripts: OrderedDict[tuple[str, str], tuple[str, float]] = OrderedDict()

    def recall(self, request: ChatCompletionRequest) -> ChatCompletionRequest:
        """The request with each assistant message that names earlier audio by `audio.id` holding that
        audio's transcript as its content; an id unknown to the caller's project, or expired, is a 400."""
        named = [
            i for i, m in enumerate(request.messages) if m.role == "assistant" and isinstance(_audio(m), dict)
        ]
        if not named:
            return request
        project, now = context.current().project, time.time()
        messages = list(request.messages)
        for i in named:
            audio_id = str((_audio(messages[i]) or {}).get("id", ""))
            kept = self._transcripts.get((project, audio_id))
            if kept is None or kept[1] < now:
                raise InvalidRequestError(
                    f"Audio with id '{audio_id}' was not found, or has expired (audio can be named for "
                    f"{LIFETIME // 60} minutes after it was made).",
                    param=f"messages[{i}].audio.id",
                )
            extra = {k: v for k, v in (messages[i].model_extra or {}).items() if k != "audio"}
            messages[i] = type(messages[i])(role="assistant", content=kept[0], **extra)
        return request.model_copy(update={"messages": messages})

    async def voiced(self, answer: ChatCompletion, audio: ChatAudio) -> ChatCompletion:
        """Each choice's text spoken as one `message.audio`; its `content` moves into the transcript."""
        for choice in answer.choices:
            text = choice.message.content
            if not text:
                continue
            pcm = b"".join([await self.speak(piece, audio.voice_name) for piece in split_sentences(text)])
            data = await anyio.to_thread.run_sync(_encoded, pcm, audio.format)
            audio_id = new_id("audio", "_")
            choice.message.audio = ChatCompletionAudio(
                id=audio_id,
                data=base64.b64encode(data).decode(),
                expires_at=self._remember(audio_id, text),
                transcript=text,
            )
            choice.message.content = None
        return answer

    async def stream(
        self, chunks: AsyncGenerator[dict[str, Any], None], audio: ChatAudio
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The chunks with each choice's text as `delta.audio.transcript` and its audio as `delta.audio.data`
        pieces, spoken while the text goes on; the chunks that end choices (and the usage) come after the
        audio."""
        voices: dict[int, _SpokenChoice] = {}
        clauses: asyncio.Queue[tuple[_SpokenChoice, str] | None] = asyncio.Queue()
        held: list[dict[str, Any]] = []
        head: dict[str, Any] = {}

        async def text() -> AsyncGenerator[dict[str, Any], None]:
            try:
                async for chunk in chunks:
                    head.update({k: chunk[k] for k in ("id", "object", "created", "model") if k in chunk})
                    ended = []
                    for choice in chunk.get("choices") or []:
                        voice = voices.setdefault(
                            choice.get("index", 0), _SpokenChoice(choice.get("index", 0), audio)
                        )
                        said = (choice.get("delta") or {}).pop("content", None)
                        if said:
                            choice["delta"]["audio"] = voice.transcribed(said)
                            for clause in voice.clauses.add(said):
                                clauses.put_nowait((voice, clause))
                        if choice.get("finish_reason"):
                            ended.append({**choice, "delta": {}, "logprobs": None})
                            choice["finish_reason"] = None
                    if ended or not chunk.get("choices"):
                        held.append({**chunk, "choices": ended})
                    if any(c.get("delta") or c.get("logprobs") for c in chunk.get("choices") or []):
                        yield chunk
            finally:
                await chunks.aclose()
            for voice in voices.values():
                for clause in voice.clauses.rest():
                    clauses.put_nowait((voice, clause))
            clauses.put_nowait(None)

        async def spoken() -> AsyncGenerator[dict[str, Any], None]:
            while (item := await clauses.get()) is not None:
                voice, clause = item
                pcm = await self.speak(clause, audio.voice_name)
                ready = await anyio.to_thread.run_sync(voice.encode, pcm)
                if ready:
                    yield voice.chunk(head, {"data": ready})
            for voice in voices.values():
                if voice.transcript:
                    tail = await anyio.to_thread.run_sync(voice.finish)
                    if tail:
                        yield voice.chunk(head, {"data": tail})
                    yield voice.chunk(head, {"expires_at": self._remember(voice.id, voice.transcript)})

        async for chunk in calls.merge([text(), spoken()]):
            yield chunk
        for chunk in held:
            if chunk["choices"] or chunk.get("usage"):
                yield chunk

    def _remember(self, audio_id: str, transcript: str) -> int:
        expires = int(time.time()) + LIFETIME
        self._transcripts[(context.current().project, audio_id)] = (transcript, expires)
        while len(self._transcripts) > _REMEMBERED:
            self._transcripts.popitem(last=False)
        return expires


def check_spoken(request: ChatCompletionRequest, voices: list[str]) -> ChatAudio:
    """The request's `audio`, checked against the speech model's `voices` before anything is generated."""
    if request.audio is None:
        raise InvalidRequestError(
            'The `audio` parameter (voice and format) is required when `modalities` includes "audio".',
            param="audio",
        )
    name = request.audio.voice_name
    if name not in voices and name not in OPENAI_VOICES:
        raise InvalidRequestError(
            f"Unknown voice `{name}`. Valid voices: {', '.join([*voices, *OPENAI_VOICES])}.",
            param="audio.voice",
        )
    return request.audio


def _audio(message: Any) -> Any:
    return (message.model_extra or {}).get("audio")


def _encoded(pcm: bytes, fmt: str) -> bytes:
    if fmt == "pcm16":
        return pcm
    return codec.encode(_samples(pcm), codec.OUTPUT_RATE, fmt)


def _samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, "<i2").astype(np.float32) / 32768.0


@dataclass
class _SpokenChoice:
    """One choice's audio as it is spoken: its id, transcript, the text not yet spoken, and its encoder."""

    index: int
    audio: ChatAudio
    id: str = field(default_factory=lambda: new_id("audio", "_"))
    transcript: str = ""
    clauses: Clauses = field(default_factory=Clauses)
    started: bool = False
    _rest: bytes = b""
    _encoder: codec.Encoder | None = None

    def __post_init__(self) -> None:
        if self.audio.format != "pcm16":
            self._encoder = codec.Encoder(self.audio.format, codec.OUTPUT_RATE, streaming=True)

    def transcribed(self, text: str) -> dict[str, str]:
        self.transcript += text
        return self._identified({"transcript": text})

    def encode(self, pcm: bytes) -> str:
        return self._aligned(self._encoder.encode(_samples(pcm)) if self._encoder else pcm)

    def finish(self) -> str:
        tail = self._encoder.finish() if self._encoder else b""
        data, self._rest = self._rest + tail, b""
        return base64.b64encode(data).decode()

    def chunk(self, head: dict[str, Any], audio: dict[str, Any]) -> dict[str, Any]:
        choice = {"index": self.index, "delta": {"audio": self._identified(audio)}, "finish_reason": None}
        return {**head, "choices": [choice]}

    def _identified(self, audio: dict[str, Any]) -> dict[str, Any]:
        if not self.started:  # the id once: chunk folds join strings
            self.started = True
            return {"id": self.id, **audio}
        return audio

    def _aligned(self, data: bytes) -> str:
        data = self._rest + data
        whole = len(data) - len(data) % _ALIGN
        self._rest = data[whole:]
        return base64.b64encode(data[:whole]).decode()
