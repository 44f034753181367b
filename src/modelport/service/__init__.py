"""The one place that turns OpenAI requests into predictor calls and back; both faces call it."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator

from openai.types import Completion, CreateEmbeddingResponse, Model
from openai.types.audio import Transcription
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from modelport.predictors.manager import ModelManager
from modelport.predictors.registry import ModelRegistry
from modelport.protocol.requests import (
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    SpeechRequest,
    TranscriptionRequest,
)
from modelport.service import audio, embeddings, generation
from modelport.service.audio import SpeechAudio
from modelport.settings import Settings

__all__ = ["Service", "SpeechAudio"]


class Service:
    """OpenAI's endpoints over a model registry, as async methods returning `openai` types."""

    def __init__(self, registry: ModelRegistry, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.manager = ModelManager(registry)
        self._created = int(time.time())

    @classmethod
    def from_settings(cls, settings: Settings) -> Service:
        """A service over the models `settings` configures."""
        return cls(ModelRegistry.from_settings(settings), settings)

    async def start(self) -> None:
        """Load every model now if the settings ask for preloading."""
        if self.settings.preload:
            await self.manager.load_all()

    def list_models(self) -> list[Model]:
        """Every registered model (aliases are not listed, but resolve)."""
        return [self._model(spec.id, spec.owned_by) for spec in self.manager.registry.specs]

    def retrieve_model(self, name: str) -> Model:
        """One model by id or alias; 404 if unknown."""
        spec = self.manager.registry.resolve(name)
        return self._model(spec.id, spec.owned_by)

    async def chat_completion(
        self, request: ChatCompletionRequest
    ) -> ChatCompletion | AsyncGenerator[ChatCompletionChunk, None]:
        """`POST /v1/chat/completions`."""
        return await generation.chat(self.manager, request)

    async def completion(self, request: CompletionRequest) -> Completion | AsyncGenerator[Completion, None]:
        """`POST /v1/completions`."""
        return await generation.completion(self.manager, request)

    async def embeddings(self, request: EmbeddingRequest) -> CreateEmbeddingResponse:
        """`POST /v1/embeddings`."""
        return await embeddings.embeddings(self.manager, request)

    async def speech(self, request: SpeechRequest) -> SpeechAudio:
        """`POST /v1/audio/speech`."""
        return await audio.speech(self.manager, request)

    async def transcription(self, request: TranscriptionRequest, file: bytes) -> Transcription | str:
        """`POST /v1/audio/transcriptions`."""
        return await audio.transcription(self.manager, request, file, self.settings.max_upload_bytes)

    def _model(self, model_id: str, owned_by: str) -> Model:
        return Model(id=model_id, created=self._created, object="model", owned_by=owned_by)
