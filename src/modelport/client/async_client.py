"""`AsyncOpenAI`: the SDK's async surface over the service, in the caller's event loop."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

from openai import omit
from openai._legacy_response import HttpxBinaryResponseContent
from openai.lib._parsing._completions import (
    parse_chat_completion,
    type_to_response_format_param,
    validate_input_tools,
)
from openai.pagination import AsyncPage
from openai.types import Completion, CreateEmbeddingResponse, Model
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionDeleted,
    ChatCompletionStoreMessage,
    ParsedChatCompletion,
)

from modelport.client.arguments import build_service, read_file, request
from modelport.client.conversation_resources import AsyncConversations
from modelport.client.file_resources import AsyncBatches, AsyncFiles
from modelport.client.local_files import inlined
from modelport.client.paginators import AsyncPaginator
from modelport.client.response_resources import AsyncResponses
from modelport.client.sdk_errors import sdk_errors
from modelport.client.sdk_render import AsyncStream, StreamedSpeech, as_translation, render
from modelport.client.vector_resources import AsyncVectorStores
from modelport.protocol.requests import (
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    MetadataUpdate,
    SpeechRequest,
    TranscriptionRequest,
)
from modelport.service import Service
from modelport.service.state.listing import ListPage
from modelport.settings import Settings


class _Resource:
    def __init__(self, service: Service) -> None:
        self._service = service


class AsyncModels(_Resource):
    """`client.models`."""

    async def list(self) -> AsyncPage[Model]:
        """Every served model."""
        return AsyncPage[Model](data=await self._service.list_models(), object="list")

    async def retrieve(self, model: str, **_: Any) -> Model:
        """One model by id or alias."""
        with sdk_errors(f"/models/{model}"):
            return self._service.retrieve_model(model)


class AsyncMessages(_Resource):
    """`client.chat.completions.messages`."""

    def list(
        self,
        completion_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        **_: Any,
    ) -> AsyncPaginator[ChatCompletionStoreMessage]:
        """The messages of a stored chat completion's request."""

        async def fetch(cursor: str | None) -> ListPage[ChatCompletionStoreMessage]:
            return await self._service.stored.messages(
                completion_id, after=cursor or after, limit=limit, order=order
            )

        return AsyncPaginator(fetch, f"/chat/completions/{completion_id}/messages")


class AsyncChatCompletions(_Resource):
    """`client.chat.completions`."""

    def __init__(self, service: Service) -> None:
        super().__init__(service)
        self.messages = AsyncMessages(service)

    async def create(self, **params: Any) -> ChatCompletion | AsyncStream[ChatCompletionChunk]:
        """Same arguments as `openai.AsyncOpenAI().chat.completions.create`."""
        with sdk_errors("/chat/completions"):
            params = await inlined(params, "messages", self._service.settings.limits.fetch_bytes)
            answer = await self._service.chat_completion(request(ChatCompletionRequest, params))
        return await render(answer, "/chat/completions")  # type: ignore[no-any-return]

    async def parse(
        self, *, response_format: Any = omit, tools: Any = omit, **params: Any
    ) -> ParsedChatCompletion[Any]:
        """Same as `openai.AsyncOpenAI().chat.completions.parse`: a pydantic `response_format` or strict
        function tools, and the answer parsed into them."""
        validate_input_tools(tools)
        sent = {**params, "response_format": type_to_response_format_param(response_format), "tools": tools}
        whole = await self.create(**{k: v for k, v in sent.items() if v is not omit})
        if not isinstance(whole, ChatCompletion):
            raise TypeError("parse() does not stream; use stream() instead")
        return parse_chat_completion(
            response_format=response_format, input_tools=tools, chat_completion=whole
        )

    async def retrieve(self, completion_id: str, **_: Any) -> ChatCompletion:
        """A stored chat completion."""
        with sdk_errors(f"/chat/completions/{completion_id}"):
            return await self._service.stored.retrieve(completion_id)

    def list(
        self,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        model: str | None = None,
        metadata: dict[str, str] | None = None,
        **_: Any,
    ) -> AsyncPaginator[ChatCompletion]:
        """Stored chat completions, oldest first unless `order="desc"`; filtered by model and metadata."""

        async def fetch(cursor: str | None) -> ListPage[ChatCompletion]:
            return await self._service.stored.list(
                after=cursor or after, limit=limit, order=order, model=model, metadata=metadata
            )

        return AsyncPaginator(fetch, "/chat/completions")

    async def update(
        self, completion_id: str, *, metadata: dict[str, str] | None, **_: Any
    ) -> ChatCompletion:
        """Replace a stored chat completion's metadata."""
        with sdk_errors(f"/chat/completions/{completion_id}"):
            checked = request(MetadataUpdate, {"metadata": metadata})
            return await self._service.stored.update(completion_id, checked.metadata)

    async def delete(self, completion_id: str, **_: Any) -> ChatCompletionDeleted:
        """Delete a stored chat completion."""
        with sdk_errors(f"/chat/completions/{completion_id}"):
            return ChatCompletionDeleted.model_validate(await self._service.stored.delete(completion_id))


class AsyncChat:
    """`client.chat`."""

    def __init__(self, service: Service) -> None:
        self.completions = AsyncChatCompletions(service)


class AsyncCompletions(_Resource):
    """`client.completions` (legacy)."""

    async def create(self, **params: Any) -> Completion | AsyncStream[Completion]:
        """Same arguments as `openai.AsyncOpenAI().completions.create`."""
        with sdk_errors("/completions"):
            answer = await self._service.completion(request(CompletionRequest, params))
        return await render(answer, "/completions")  # type: ignore[no-any-return]


class AsyncEmbeddings(_Resource):
    """`client.embeddings`."""

    async def create(self, **params: Any) -> CreateEmbeddingResponse:
        """Same arguments as `openai.AsyncOpenAI().embeddings.create`."""
        with sdk_errors("/embeddings"):
            return await self._service.embeddings(request(EmbeddingRequest, params))


class AsyncSpeech(_Resource):
    """`client.audio.speech`."""

    async def create(self, **params: Any) -> HttpxBinaryResponseContent:
        """Same arguments as `openai.AsyncOpenAI().audio.speech.create`; the whole audio."""
        with sdk_errors("/audio/speech"):
            answer = await self._service.speech(request(SpeechRequest, params), whole=True)
            return await render(answer, "/audio/speech", returns="binary")  # type: ignore[no-any-return]

    @property
    def with_streaming_response(self) -> AsyncStreamingSpeech:
        """`async with ….with_streaming_response.create(...) as response`: audio as it is synthesised."""
        return AsyncStreamingSpeech(self._service)


class AsyncStreamingSpeech(_Resource):
    """`client.audio.speech.with_streaming_response`."""

    @asynccontextmanager
    async def create(self, **params: Any) -> AsyncIterator[StreamedSpeech]:
        """Same arguments as `audio.speech.create`; streams (`stream_format` defaults to `audio`)."""
        with sdk_errors("/audio/speech"):
            answer = await self._service.speech(request(SpeechRequest, params))
            streamed: StreamedSpeech = await render(answer, "/audio/speech", returns="streamed")
        try:
            yield streamed
        finally:
            await streamed.close()


class AsyncTranscriptions(_Resource):
    """`client.audio.transcriptions`."""

    async def create(self, *, file: Any, **params: Any) -> Any:
        """Same arguments as `openai.AsyncOpenAI().audio.transcriptions.create` (`stream=True` too)."""
        with sdk_errors("/audio/transcriptions"):
            answer = await self._service.transcription(request(TranscriptionRequest, params), read_file(file))
            return await render(answer, "/audio/transcriptions", returns="text")


class AsyncTranslations(_Resource):
    """`client.audio.translations`."""

    async def create(self, *, file: Any, **params: Any) -> Any:
        """Same arguments as `openai.AsyncOpenAI().audio.translations.create`."""
        with sdk_errors("/audio/translations"):
            answer = await self._service.translation(request(TranscriptionRequest, params), read_file(file))
            return as_translation(await render(answer, "/audio/translations", returns="text"))


class AsyncAudio:
    """`client.audio`."""

    def __init__(self, service: Service) -> None:
        self.speech = AsyncSpeech(service)
        self.transcriptions = AsyncTranscriptions(service)
        self.translations = AsyncTranslations(service)


class AsyncOpenAI:
    """Drop-in for `openai.AsyncOpenAI` that runs the models in this process.

    With no arguments it serves the default models, each loaded on first use. `config` reads a
    `models.toml`; `service` shares one already built (with `OpenAI` or a server). `api_key`, `base_url`
    and other transport options of the SDK are accepted and ignored.
    """

    def __init__(
        self,
        *,
        config: str | os.PathLike[str] | None = None,
        settings: Settings | None = None,
        service: Service | None = None,
        preload: bool = False,
        **_transport: Any,
    ) -> None:
        self.service = build_service(service, settings, config, preload)
        self._owns_service = service is None
        self.models = AsyncModels(self.service)
        self.chat = AsyncChat(self.service)
        self.completions = AsyncCompletions(self.service)
        self.embeddings = AsyncEmbeddings(self.service)
        self.audio = AsyncAudio(self.service)
        self.responses = AsyncResponses(self.service)
        self.files = AsyncFiles(self.service)
        self.conversations = AsyncConversations(self.service)
        self.vector_stores = AsyncVectorStores(self.service, self.files)
        self.batches = AsyncBatches(self.service)

    async def close(self) -> None:
        """Stop probing upstreams, running batches and close connections, if this client built its
        service."""
        if self._owns_service:
            await self.service.close()

    async def __aenter__(self) -> AsyncOpenAI:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
