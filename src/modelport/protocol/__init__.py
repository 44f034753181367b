"""OpenAI wire types: request models here; responses are the `openai` package's own types."""

from modelport.protocol.requests import (
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    OpenAIRequest,
    SpeechRequest,
    TranscriptionRequest,
)

__all__ = [
    "ChatCompletionRequest",
    "CompletionRequest",
    "EmbeddingRequest",
    "OpenAIRequest",
    "SpeechRequest",
    "TranscriptionRequest",
]
