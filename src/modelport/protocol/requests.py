"""Request bodies of the OpenAI endpoints, validated once at the edge (HTTP or in-process)."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, field_validator

log = logging.getLogger("modelport.protocol")


# Engines count in 32-bit integers: a bigger number is an argument error here, not an overflow there.
INT32 = 2**31 - 1
_TokenId = Annotated[str, StringConstraints(pattern=r"^\d{1,10}$")]


def _bounded_metadata(value: dict[str, str] | None) -> dict[str, str] | None:
    """OpenAI's bounds on `metadata`: 16 pairs at most, keys of 64 characters, values of 512."""
    if value is None:
        return None
    if len(value) > 16:
        raise ValueError(f"metadata may hold at most 16 keys, not {len(value)}")
    for key, item in value.items():
        if len(key) > 64:
            raise ValueError(f"metadata key {key[:20]!r}… is longer than 64 characters")
        if len(item) > 512:
            raise ValueError(f"metadata value of {key!r} is longer than 512 characters")
    return value


Metadata = Annotated[dict[str, str] | None, AfterValidator(_bounded_metadata)]


# The efforts OpenAI defines, on both APIs (`reasoning_effort`, `reasoning.effort`).
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class OpenAIRequest(BaseModel):
    """Accepts fields it does not know (clients send vendor extras) and keeps them in `model_extra`."""

    model_config = ConfigDict(extra="allow", protected_namespaces=())

    model: str = Field(min_length=1)

    def extras(self) -> dict[str, Any]:
        """Fields the caller sent beyond the ones OpenAI documents."""
        return dict(self.model_extra or {})


class StreamOptions(BaseModel):
    """`stream_options` of chat and completions."""

    include_usage: bool = False


class ChatMessage(BaseModel):
    """One message; fields beyond `role` (content parts, tool calls, names) pass through unchanged."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None

    @field_validator("content")
    @classmethod
    def _text_parts(cls, value: str | list[dict[str, Any]] | None) -> str | list[dict[str, Any]] | None:
        # What every path reads of a part (llama.cpp, the templates rendered here, the tool formats) is its
        # text: a `text` part without a string one failed deep inside them (a 500).
        for j, part in enumerate(value if isinstance(value, list) else []):
            if ("text" in part or part.get("type") == "text") and not isinstance(part.get("text"), str):
                raise ValueError(f"content[{j}].text must be a string")
        return value


class _GenerationRequest(OpenAIRequest):
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=INT32)
    n: int = Field(default=1, ge=1, le=128)
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=-(2**63), lt=2**64)
    logit_bias: dict[_TokenId, Annotated[float, Field(ge=-100, le=100)]] | None = None
    user: str | None = None
    # Beyond OpenAI (vLLM's names, sent through `extra_body`); honoured on both endpoints.
    top_k: int | None = Field(default=None, ge=-1, le=INT32)
    min_p: float | None = Field(default=None, ge=0, le=1)
    repetition_penalty: float | None = Field(default=None, gt=0, le=10)
    ignore_eos: bool | None = None
    best_of: int | None = Field(default=None, ge=1, le=20)
    use_beam_search: bool = False
    length_penalty: float = 1.0
    early_stopping: bool = False
    guided_json: dict[str, Any] | str | None = None
    guided_choice: list[str] | None = None
    guided_regex: str | None = None
    guided_grammar: str | None = None
    # modelport's own: JSON output held to a compact layout (one space after `,` and `:`), or left free.
    json_whitespace: Literal["compact", "flexible"] = "compact"

    @field_validator("stop")
    @classmethod
    def _stop_limit(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > 4:
            raise ValueError("at most 4 stop sequences are allowed")
        # An empty stop sequence is found before the first token, which would end every answer empty: it
        # stops nothing (a client's list built with a blank in it).
        if isinstance(value, list):
            return [stop for stop in value if stop] or None
        return value or None

    @property
    def include_usage(self) -> bool:
        """Whether a streamed answer ends with a usage chunk."""
        return bool(self.stream and self.stream_options and self.stream_options.include_usage)


class ChatAudio(BaseModel):
    """`audio` of a chat request: how an answer asked for in `modalities: ["audio"]` is spoken. A voice is
    one of OpenAI's names or the speech model's own, or `{"id": ...}` naming one of the model's own."""

    voice: str | dict[str, str]
    format: Literal["wav", "aac", "mp3", "flac", "opus", "pcm16"]

    @property
    def voice_name(self) -> str:
        """The voice as one name."""
        return self.voice if isinstance(self.voice, str) else str(self.voice.get("id", ""))


class ChatCompletionRequest(_GenerationRequest):
    """`POST /v1/chat/completions`."""

    messages: list[ChatMessage] = Field(min_length=1)
    modalities: list[Literal["text", "audio"]] | None = None
    audio: ChatAudio | None = None
    max_completion_tokens: int | None = Field(default=None, ge=1, le=INT32)
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    store: bool | None = None
    metadata: Metadata = None
    # How long a model that thinks may think (see `service/generation/formats/effort.py`): accepted on every
    # model, as OpenAI does; a model that does not think ignores it.
    reasoning_effort: ReasoningEffort | None = None
    # OpenAI's key to cache the prompt under: a caller that gives one means to send it again, so even a
    # conversation's first message alone is kept for the turn after it (the llama.cpp engine's
    # conversation cache otherwise keeps a lone message that ends beside others only from its second
    # sending).
    prompt_cache_key: str | None = None

    @field_validator("response_format")
    @classmethod
    def _format(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and value.get("type") not in ("text", "json_object", "json_schema"):
            raise ValueError("response_format.type must be 'text', 'json_object' or 'json_schema'")
        return value

    @property
    def max_output_tokens(self) -> int | None:
        """`max_completion_tokens`, falling back to the older `max_tokens`."""
        return self.max_completion_tokens or self.max_tokens

    @property
    def spoken(self) -> bool:
        """Whether the answer is to be spoken (`modalities` holds `audio`)."""
        return "audio" in (self.modalities or ())

    def parts(self, *kinds: str) -> list[tuple[int, int]]:
        """Where the content parts of these types are: (message, part) indices, in order."""
        return [
            (i, j)
            for i, message in enumerate(self.messages)
            if isinstance(message.content, list)
            for j, part in enumerate(message.content)
            if isinstance(part, dict) and part.get("type") in kinds
        ]


class CompletionRequest(_GenerationRequest):
    """`POST /v1/completions` (legacy)."""

    prompt: str | Annotated[list[str] | list[int] | list[list[int]], Field(min_length=1)]
    # OpenAI's default for this endpoint; 0 scores the prompt alone (with `echo` and `logprobs`)
    max_tokens: int | None = Field(default=16, ge=0, le=INT32)
    echo: bool | None = None
    logprobs: int | None = Field(default=None, ge=0, le=5)
    suffix: str | None = None

    @property
    def max_output_tokens(self) -> int | None:
        """`max_tokens` (this endpoint has no `max_completion_tokens`)."""
        return self.max_tokens


class EmbeddingRequest(OpenAIRequest):
    """`POST /v1/embeddings`."""

    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1, le=INT32)
    user: str | None = None
    # modelport's own (Ollama's and Text Embeddings Inference's name): an input longer than the model reads
    # at once is cut to what it reads, unless false, where it is a 400.
    truncate: bool = True

    @field_validator("input")
    @classmethod
    def _not_empty(cls, value: str | list[Any]) -> str | list[Any]:
        if value == "" or value == []:
            raise ValueError("input must not be empty")
        return value


SpeechFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]


class SpeechRequest(OpenAIRequest):
    """`POST /v1/audio/speech`."""

    input: str = Field(min_length=1, max_length=4096)
    voice: str = Field(min_length=1)
    response_format: SpeechFormat = "mp3"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    instructions: str | None = None
    stream_format: Literal["audio", "sse"] | None = None


# Every format of OpenAI's; `diarized_json` (speakers, from gpt-4o-transcribe-diarize) is refused by name.
TranscriptionFormat = Literal["json", "text", "srt", "verbose_json", "vtt", "diarized_json"]


class TranscriptionRequest(OpenAIRequest):
    """`POST /v1/audio/transcriptions`, less the uploaded file."""

    language: str | None = None
    prompt: str | None = None
    response_format: TranscriptionFormat = "json"
    temperature: float | None = Field(default=None, ge=0, le=1)
    timestamp_granularities: list[Literal["word", "segment"]] | None = None
    stream: bool = False


class MetadataUpdate(BaseModel):
    """`POST /v1/chat/completions/{id}`: a stored completion's new metadata."""

    metadata: Metadata = None


class ConversationCreate(BaseModel):
    """`POST /v1/conversations`: up to 20 first items, and metadata."""

    model_config = ConfigDict(extra="forbid")

    items: list[dict[str, Any]] | None = Field(default=None, max_length=20)
    metadata: Metadata = None


class ConversationItemsCreate(BaseModel):
    """`POST /v1/conversations/{id}/items`: up to 20 items to append."""

    model_config = ConfigDict(extra="forbid")

    items: list[dict[str, Any]] = Field(max_length=20)


class FileExpiry(BaseModel):
    """`expires_after` of an uploaded file: seconds after its creation, an hour to 30 days (OpenAI's)."""

    model_config = ConfigDict(extra="forbid")

    anchor: Literal["created_at"]
    seconds: int = Field(ge=3600, le=2592000)


class FileUpload(BaseModel):
    """`POST /v1/files`, less the uploaded file: what the file is for, and when it expires. Its fields come
    as multipart text (`expires_after[seconds]=86400`) and are read as their types here."""

    purpose: str
    expires_after: FileExpiry | None = None


class UploadCreate(BaseModel):
    """`POST /v1/uploads`: a file to be sent in parts (its size, name, type and purpose), and when the file
    it becomes expires."""

    model_config = ConfigDict(extra="forbid")

    bytes: int = Field(ge=1, le=2**63 - 1)
    filename: str = Field(min_length=1)
    mime_type: str = Field(min_length=1, max_length=255)
    purpose: str
    expires_after: FileExpiry | None = None


class UploadComplete(BaseModel):
    """`POST /v1/uploads/{id}/complete`: the parts in their order, and the md5 of the whole (optional)."""

    model_config = ConfigDict(extra="forbid")

    part_ids: list[str] = Field(min_length=1, max_length=10_000)
    md5: str | None = None


class BatchCreate(BaseModel):
    """`POST /v1/batches`."""

    model_config = ConfigDict(extra="forbid")

    input_file_id: str
    endpoint: str
    completion_window: str = "24h"
    metadata: Metadata = None


class ExpiresAfter(BaseModel):
    """When a realtime client secret expires: `seconds` after it is made (10 s to 2 hours)."""

    model_config = ConfigDict(extra="forbid")

    anchor: Literal["created_at"] = "created_at"
    seconds: int = Field(default=600, ge=10, le=7200)


class ClientSecretCreate(BaseModel):
    """`POST /v1/realtime/client_secrets`: the session a client secret opens (a realtime or transcription
    session's configuration, as `session.update` takes it), and when the secret expires."""

    model_config = ConfigDict(extra="forbid")

    expires_after: ExpiresAfter | None = None
    session: dict[str, Any] | None = None
