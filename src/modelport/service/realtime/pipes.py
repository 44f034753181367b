"""What a realtime session asks of the rest of the service, on its pipeline's models: a streamed chat
answer, a transcript of the user's speech, and speech of the answer's text. Each goes through the
service's own operation, admitted and metered as any request of it is."""

from __future__ import annotations

import io
import wave
from typing import Any, Protocol

import numpy as np
from openai.types.chat import ChatCompletion

from modelport.predictors.relay import Upload
from modelport.protocol.answers import Events
from modelport.protocol.requests import ChatCompletionRequest, TranscriptionRequest
from modelport.service.audio.transcription import Transcribed
from modelport.service.realtime.audio import LISTEN_RATE
from modelport.settings import RealtimePipeline


class VoiceModels(Protocol):
    """The service's operations a realtime pipeline chains."""

    async def chat_completion(
        self, request: ChatCompletionRequest
    ) -> ChatCompletion | Events[ChatCompletion]: ...

    async def transcription(self, request: TranscriptionRequest, file: Upload) -> Transcribed: ...

    async def pcm_speech(self, text: str, voice: str, model: str, speed: float) -> bytes: ...


class Pipes:
    """One session's way to its pipeline's models."""

    def __init__(self, models: VoiceModels, pipeline: RealtimePipeline) -> None:
        self.models, self.pipeline = models, pipeline

    async def chat(self, request: ChatCompletionRequest) -> ChatCompletion | Events[ChatCompletion]:
        return await self.models.chat_completion(request)

    async def transcribe(self, samples: np.ndarray, given: dict[str, Any]) -> str:
        """The transcript of 16 kHz float audio, with the session's transcription settings (`given`)."""
        request = TranscriptionRequest(
            model=given.get("model") or self.pipeline.transcription,
            language=given.get("language"),
            prompt=given.get("prompt"),
        )
        answer = await self.models.transcription(request, Upload("speech.wav", _wav(samples)))
        return str(getattr(answer, "text", "")).strip()

    async def speak(self, text: str, voice: str, speed: float) -> bytes:
        """`text` said by the pipeline's speech model: 16-bit PCM, mono at 24 kHz."""
        return await self.models.pcm_speech(text, voice, self.pipeline.speech, speed)


def _wav(samples: np.ndarray) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(LISTEN_RATE)
        file.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return out.getvalue()
