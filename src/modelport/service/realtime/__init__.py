"""OpenAI's Realtime API on the models modelport serves: a pipeline (`engine = "realtime"` in models.toml)
chains speech detection, a transcription model, a chat model and a speech model. `Realtime.open` starts a
session for a connection once the pipeline's models are loaded; the session (`session`) takes the
client's events, the response (`responses`) streams the answer, `conversation` holds the items, `turns`
finds where speech starts and stops, `audio` converts the formats, `config` merges `session.update`s,
`events` checks every event against the openai package's types."""

from __future__ import annotations

import asyncio
import io
import wave
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from modelport.errors import ModelNotFoundError
from modelport.predictors.manager import ModelManager
from modelport.predictors.relay import Upload
from modelport.protocol.requests import TranscriptionRequest
from modelport.service.realtime.audio import LISTEN_RATE
from modelport.service.realtime.realtime_events import Event
from modelport.service.realtime.responses import Pipes
from modelport.service.realtime.session import RealtimeSession
from modelport.settings import DEFAULT_REALTIME, RealtimePipeline, Settings

__all__ = ["Realtime", "RealtimeSession"]


class Realtime:
    """Opens realtime sessions on the configured pipelines."""

    def __init__(
        self,
        settings: Settings,
        manager: ModelManager,
        chat: Callable[[Any], Awaitable[Any]],
        transcription: Callable[[TranscriptionRequest, Upload], Awaitable[Any]],
        speak: Callable[[str, str, str, float], Awaitable[bytes]],
    ) -> None:
        self.settings, self.manager = settings, manager
        self.pipelines = settings.pipelines()
        self._aliases = settings.all_aliases()
        self._chat, self._transcription, self._speak = chat, transcription, speak

    def pipeline(self, name: str | None) -> RealtimePipeline:
        """The pipeline a `model` names (OpenAI's realtime model names are the default one); a 404
        otherwise."""
        wanted = self._aliases.get(name, name) if name else DEFAULT_REALTIME
        if wanted not in self.pipelines and name:
            wanted = self.settings.openai_name(name) or wanted  # gpt-realtime-mini-2025-10-06, …
        if wanted not in self.pipelines:
            raise ModelNotFoundError(name or DEFAULT_REALTIME)
        return self.pipelines[wanted]

    async def open(
        self,
        model: str | None,
        intent: str | None,
        send: Callable[[Event], Awaitable[None]],
        beta_protocol: bool = False,
    ) -> RealtimeSession:
        """A session on the pipeline `model` names (or the default), its models loaded, `session.created`
        sent. `intent=transcription` opens a transcription session; `beta_protocol`, one that speaks the
        beta protocol (`beta`)."""
        pipeline = self.pipeline(model)
        kind = "transcription" if intent == "transcription" else "realtime"
        needed = [pipeline.transcription] if kind == "transcription" else [
            pipeline.transcription, pipeline.chat, pipeline.speech,
        ]  # fmt: skip
        await asyncio.gather(*(self.manager.get(name) for name in needed))

        async def transcribe(samples: np.ndarray, given: dict[str, Any]) -> str:
            request = TranscriptionRequest(
                model=given.get("model") or pipeline.transcription,
                language=given.get("language"),
                prompt=given.get("prompt"),
            )
            answer = await self._transcription(request, Upload("speech.wav", _wav(samples)))
            return str(getattr(answer, "text", "")).strip()

        async def speak(text: str, voice: str, speed: float) -> bytes:
            return await self._speak(text, voice, pipeline.speech, speed)

        pipes = Pipes(chat=self._chat, transcribe=transcribe, speak=speak)
        session = RealtimeSession(
            pipeline, kind, model or pipeline.id, pipes, self.settings.limits, send, beta_protocol
        )
        await session.start()
        return session


def _wav(samples: np.ndarray) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(LISTEN_RATE)
        file.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return out.getvalue()
