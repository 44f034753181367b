"""The one place that turns OpenAI requests into predictor calls and back; every face calls it.

Each method answers in one of the three shapes of `modelport.protocol.answers`: a whole object, `Events`,
or `Binary`. A model's capability is served by a checked predictor here, or by a relay to elsewhere; which
one is decided in `_answer`, once for every endpoint. By capability: `generation` (chat, completions,
tools, grammars), `responses`, `audio` (speech, transcription), `embeddings`, `vectors` (vector stores and
their search), and `state` (stored chat completions, files, batches).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import numpy as np
from openai.types import Completion, CreateEmbeddingResponse, Model
from openai.types.chat import ChatCompletion

from modelport import context, metrics
from modelport.engines import assemble
from modelport.engines.llamacpp import xllamacpp_loader
from modelport.errors import InvalidRequestError, ModelNotFoundError, StoreUnavailableError
from modelport.predictors.chat_format import PLAIN
from modelport.predictors.contract import Capability, Predictor
from modelport.predictors.manager import LoadedModel, ModelManager
from modelport.predictors.registry import ModelRegistry
from modelport.predictors.relay import Relay, Upload
from modelport.protocol.answers import Binary, Events
from modelport.protocol.generate_request import VllmGenerateRequest
from modelport.protocol.requests import (
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    OpenAIRequest,
    SpeechRequest,
    TranscriptionRequest,
)
from modelport.service import calls, embeddings, forwarding, generation, limits, watchdog
from modelport.service.access import Access
from modelport.service.audio.speech import speech as synthesised
from modelport.service.audio.transcription import (
    Transcribed,
    Translated,
    check_upload,
    transcribe,
    translated,
)
from modelport.service.documents import Bounds, DocumentReader
from modelport.service.fetching import Fetcher
from modelport.service.generation import vllm_generate
from modelport.service.generation.audio_parts import heard
from modelport.service.generation.images import Images
from modelport.service.generation.inputs import Inputs, refuse_media
from modelport.service.generation.spoken import SpokenAnswers, check_spoken
from modelport.service.operation_table import OPERATIONS
from modelport.service.realtime import Realtime
from modelport.service.responses import Responses
from modelport.service.responses.sealing import Sealer
from modelport.service.state.batch_runner import BatchRunner
from modelport.service.state.batches import Batches
from modelport.service.state.files import Files
from modelport.service.state.stored_completions import StoredCompletions
from modelport.service.state.uploads import Uploads
from modelport.service.vectors import Embedder, VectorStores, chunking
from modelport.settings import (
    DEFAULT_CHAT,
    DEFAULT_EMBEDDING,
    DEFAULT_SPEECH,
    DEFAULT_TRANSCRIPTION,
    WHISPER_MULTILINGUAL,
    Settings,
    data_dir,
)
from modelport.store import Store

A = TypeVar("A")

__all__ = ["Service", "Upload"]


class Service:
    """OpenAI's endpoints over a model registry, as async methods."""

    def __init__(self, registry: ModelRegistry, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.manager = ModelManager(
            registry, self.settings.load_wait, self.settings.batches.share, self.settings.budget()
        )
        self._reaper: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self.progress: Callable[[str, int, int], None] | None = None  # told of each model preloaded
        # The event loop that started the service (a server's): clients given this service run there.
        self.loop: asyncio.AbstractEventLoop | None = None
        self._created = int(time.time())
        url = self.settings.store.resolved_url()
        self.store = Store(url) if url else None
        self.access = Access(self.store, self.settings)
        self.stored = StoredCompletions(self.store, self.settings.store)
        self.files = Files(self.store, self.settings.files)
        self.uploads = Uploads(self.store, self.files)
        bounds = self.settings.limits
        fetcher = Fetcher(
            self.settings.allow_fetch, self.settings.remote_fetch, bounds.fetch_bytes, bounds.fetch_seconds
        )
        self.documents = DocumentReader(
            Bounds(
                bounds.document_pages,
                bounds.document_chars,
                bounds.document_seconds,
                bounds.document_memory_mb,
            ),
            bounds.document_workers,
        )
        self.inputs = Inputs(self.files, fetcher, bounds, self.documents)
        self.images = Images(self.files, fetcher, bounds)
        self.spoken = SpokenAnswers(self.pcm_speech)
        embedder = Embedder(self._embed, self._reader, self._usable)
        self.vector_stores = VectorStores(
            self.store, self.files, embedder, self.documents, DEFAULT_EMBEDDING, self.settings.vector_stores
        )
        self.responses = Responses(
            self,
            registry,
            self.store,
            self.vector_stores,
            fetcher,
            bounds,
            self.settings.store.background_timeout,
            Sealer(data_dir()),
        )
        self.realtime = Realtime(
            self.settings,
            self.manager,
            self,
            self.access,
        )
        batching = self.settings.batches
        runner = BatchRunner(
            self.store, self.files, self._batch_line, self._known, batching.concurrency, batching.lease
        )
        self.batches = Batches(self.store, self.files, runner)

    @classmethod
    def from_settings(cls, settings: Settings) -> Service:
        """A service over the models `settings` configures."""
        return cls(assemble.registry(settings), settings)

    async def start(self) -> None:
        """Probe upstreams, read what they list, and load every model now if the settings ask for it."""
        self.loop = asyncio.get_running_loop()
        registry = self.manager.registry
        await asyncio.gather(*(pool.check() for pool in registry.pools))  # discovery asks healthy ones
        for pool in registry.pools:
            pool.start()
        await registry.refresh_catalogs(after=0)
        if self.store is not None:
            try:
                await self.store.open()  # migrations run now, not under the first request
                if self.responses.jobs is not None:
                    await self.responses.jobs.reap_all()
                await self.vector_stores.start()
            except StoreUnavailableError:
                pass  # logged, and shown by /health; requests that need the store answer 503
            self.batches.runner.start()
        self._reaper = asyncio.create_task(self.manager.reap_idle())
        self._watchdog = asyncio.create_task(watchdog.watch())
        if self.settings.preload:
            await self.manager.load_all(self.progress)

    async def close(self) -> None:
        """Stop probing upstreams and unloading idle models; close upstream and store connections; free
        the loaded models."""
        if self._reaper is not None:
            self._reaper.cancel()
        if self._watchdog is not None:
            self._watchdog.cancel()
        for pool in self.manager.registry.pools:
            await pool.close()
        await self.batches.runner.close()
        await self.vector_stores.close()
        self.documents.close()
        await self.access.close()
        if self.store is not None:
            await self.store.close()
        await self.manager.close()
        self.loop = None

    def upstreams(self) -> list[dict[str, Any]]:
        """The state of every upstream replica, by the models.toml entry it serves, for `/health`."""
        return [
            {"name": pool.name, "replicas": [replica.state() for replica in pool.replicas]}
            for pool in self.manager.registry.pools
        ]

    async def list_models(self, *, loaded: bool = False) -> list[Model]:
        """Every model, discovered ones included (aliases are not listed, but resolve); or only the
        `loaded` ones."""
        await self.manager.registry.refresh_catalogs()
        caller = context.current()
        models = [
            self._model(s.id)
            for s in self.manager.registry.specs
            if (not loaded or self.manager.loaded(s.id) is not None)
            and self.access.quotas.allows(caller, s.id)
        ]
        return models + ([] if loaded else [self._pipeline(p) for p in self.realtime.pipelines])

    def retrieve_model(self, name: str) -> Model:
        """One model by id or alias (OpenAI's realtime names reach the default pipeline, as
        `/v1/realtime?model=` does); 404 if unknown, or if the caller may not use it."""
        pipeline = name if name in self.realtime.pipelines else self.settings.openai_name(name)
        if pipeline in self.realtime.pipelines:
            return self._pipeline(pipeline)
        return self._model(self._usable(name))

    async def load(self, name: str) -> str:
        """Load a model the caller may use, if it is not loaded (as Ollama's requests with nothing to make
        ask); its id."""
        model_id = self._usable(name)
        await self.manager.get(model_id)
        return model_id

    async def keep_alive(self, name: str, seconds: float | None) -> bool:
        """A request's own `keep_alive` for a model it may use (Ollama's): 0 unloads it now, whether it was
        loaded; otherwise it is loaded (if it is not), and stays that long once idle (None: until unloaded),
        in place of its configuration's."""
        if seconds == 0:
            return await self.manager.unload(self._usable(name), "keep_alive")
        self.manager.keep(await self.load(name), seconds)
        return True

    def _pipeline(self, name: str) -> Model:
        """A realtime pipeline as a model: what it chains, for `/v1/realtime?model=`."""
        pipeline = self.realtime.pipelines[name]
        chained = pipeline.model_dump(include={"transcription", "chat", "speech", "vad"})
        return Model.model_validate(
            {
                "id": name,
                "created": self._created,
                "object": "model",
                "owned_by": "modelport",
                "capabilities": ["realtime"],
                "pipeline": chained,
            }
        )

    async def voices(self, model: str) -> list[str]:
        """The voices a speech model offers (loading it if needed); OpenAI's names map onto them."""
        loaded = await self.manager.get(model)
        return list(loaded.predictor(Capability.SPEECH).voices)

    async def chat_completion(
        self, request: ChatCompletionRequest
    ) -> ChatCompletion | Events[ChatCompletion]:
        """`POST /v1/chat/completions`; stored if it asks (`store`) or the settings say always."""
        limits.check_generation(request, self.settings.limits)
        stored = self.stored.wanted(request)
        if stored:
            await self.stored.ready()
        given = request
        request = await self.inputs.chat(request)  # files become their text, for every model
        if request is not given:
            limits.check_generation(request, self.settings.limits)

        async def local(model: LoadedModel, predictor: Predictor) -> ChatCompletion | Events[ChatCompletion]:
            # A relay passes images and audio on; here audio is transcribed and images need a projector,
            # and an answer asked for as audio is said by the speech model.
            voice = check_spoken(request, await self._speech_voices()) if request.spoken else None
            said = request if "audio" in predictor.media else await heard(request, self._transcript)
            refuse_media(said, model.spec.id, predictor.media)
            seen = await self.images.chat(said) if "image" in predictor.media else said
            answer = await generation.chat(model, predictor, self.spoken.recall(seen))
            if voice is None:
                return answer
            if isinstance(answer, Events):
                return Events(await calls.eager(self.spoken.stream(answer.items, voice)), answer.kind)
            return await self.spoken.voiced(answer, voice)

        answer: ChatCompletion | Events[ChatCompletion] = await self._answer(Capability.CHAT, request, local)
        return await self.stored.keep(given, answer) if stored else answer

    async def completion(self, request: CompletionRequest) -> Completion | Events[Completion]:
        """`POST /v1/completions`."""
        limits.check_generation(request, self.settings.limits)
        answer: Completion | Events[Completion] = await self._answer(
            Capability.COMPLETION,
            request,
            lambda model, predictor: generation.completion(model, predictor, request),
        )
        return answer

    async def generate(self, request: VllmGenerateRequest) -> dict[str, Any] | Events[dict[str, Any]]:
        """`POST /generate` (vLLM's demo endpoint): on the completion path; the default chat model when the
        request names none."""
        return await vllm_generate.generate(self.manager, self.completion, request, DEFAULT_CHAT)

    async def embeddings(self, request: EmbeddingRequest) -> CreateEmbeddingResponse:
        """`POST /v1/embeddings`."""
        limits.check_embeddings(request, self.settings.limits)
        answer: CreateEmbeddingResponse = await self._answer(
            Capability.EMBEDDING,
            request,
            lambda model, predictor: embeddings.embeddings(model, predictor, request),
        )
        return answer

    async def _embed(self, model: str, texts: list[str]) -> np.ndarray:
        """Texts embedded by `model` as a vector store does it: through `/v1/embeddings`' own path (so its
        limits and usage apply)."""
        answer = await self.embeddings(EmbeddingRequest(model=model, input=texts))
        return np.array([row.embedding for row in answer.data], dtype=np.float32)

    def _usable(self, name: str) -> str:
        """The id of a model the caller may use (one retrieved, a vector store's embedding model); a 404 as
        for any request, if the caller's project may not."""
        model_id = self.manager.registry.resolve(name).id
        if not self.access.quotas.allows(context.current(), model_id):
            raise ModelNotFoundError(name)
        return model_id

    async def _reader(self, model: str) -> chunking.EmbeddingReader:
        """What an embedding model reads, for cutting files into chunks (loading it if needed)."""
        predictor = (await self.manager.get(model)).predictor(Capability.EMBEDDING)
        spans = predictor.token_spans if isinstance(predictor, Predictor) else None
        return (
            chunking.EmbeddingReader(spans.max_tokens, spans.token_spans)
            if spans
            else chunking.EmbeddingReader()
        )

    async def _transcript(self, audio: bytes, form: str, param: str) -> str:
        """What the server's transcription model hears in an audio part of a message."""
        try:
            self.manager.registry.resolve(DEFAULT_TRANSCRIPTION)
        except ModelNotFoundError:
            raise InvalidRequestError(
                f"{param} is audio, which the models here read as its transcript, and this server serves no "
                f"transcription model ({DEFAULT_TRANSCRIPTION}).",
                param=param,
                code="model_not_multimodal",
            ) from None
        upload = Upload(f"audio.{form}", audio)
        try:
            answer = await self.transcription(TranscriptionRequest(model=DEFAULT_TRANSCRIPTION), upload)
        except InvalidRequestError as error:
            if error.param != "file":
                raise
            # The audio is the part's, not an uploaded file's: the error names where it is in the messages.
            raise InvalidRequestError(
                f"{param}.data: {error.message}", param=f"{param}.data", code=error.code
            ) from None
        return str(getattr(answer, "text", ""))

    async def _speech_voices(self) -> list[str]:
        """The voices of the speech model that says chat answers asked for as audio."""
        try:
            return await self.voices(DEFAULT_SPEECH)
        except ModelNotFoundError:
            raise InvalidRequestError(
                f"`modalities` asks for audio, which this server speaks with its speech model "
                f"({DEFAULT_SPEECH}), and it serves none.",
                param="modalities",
                code="model_not_multimodal",
            ) from None

    async def pcm_speech(
        self, text: str, voice: str, model: str = DEFAULT_SPEECH, speed: float = 1.0
    ) -> bytes:
        """`text` said by a speech model (the server's, unless named): raw 16-bit PCM, mono at 24 kHz."""
        request = SpeechRequest(model=model, input=text, voice=voice, response_format="pcm", speed=speed)
        answer = await self.speech(request, whole=True)
        assert isinstance(answer, Binary)
        assert answer.content is not None
        return answer.content

    async def speech(self, request: SpeechRequest, *, whole: bool = False) -> Binary | Events[dict[str, Any]]:
        """`POST /v1/audio/speech`: audio as it is synthesised (or SSE events), or the `whole` file."""
        answer: Binary | Events[dict[str, Any]] = await self._answer(
            Capability.SPEECH,
            request,
            lambda model, predictor: synthesised(model, predictor, request, whole=whole),
        )
        return answer

    async def transcription(self, request: TranscriptionRequest, file: Upload) -> Transcribed:
        """`POST /v1/audio/transcriptions`."""
        return await self._transcribed(Capability.TRANSCRIPTION, request, file)

    async def translation(self, request: TranscriptionRequest, file: Upload) -> Translated:
        """`POST /v1/audio/translations`: speech in any language to English text. `whisper-1`, OpenAI's one
        translation model, reaches the multilingual default here (where it is served): the transcription
        default it reaches elsewhere hears English only."""
        registry = self.manager.registry
        reached = self.settings.openai_name(request.model) if registry.by_rule(request.model) else None
        if reached == DEFAULT_TRANSCRIPTION:
            try:
                registry.resolve(WHISPER_MULTILINGUAL)
            except ModelNotFoundError:
                pass  # (the 400 of the model it reaches says it cannot translate)
            else:
                request = request.model_copy(update={"model": WHISPER_MULTILINGUAL})
        return translated(await self._transcribed(Capability.TRANSLATION, request, file))

    async def _transcribed(
        self, capability: Capability, request: TranscriptionRequest, file: Upload
    ) -> Transcribed:
        check_upload(file, self.settings.max_upload_bytes)
        answer: Transcribed = await self._answer(
            capability,
            request,
            lambda model, predictor: transcribe(model, predictor, request, file, self.settings.limits),
            file,
        )
        return answer

    async def _answer(
        self,
        capability: Capability,
        request: OpenAIRequest,
        local: Callable[[LoadedModel, Predictor], Awaitable[A]],
        upload: Upload | None = None,
    ) -> A | Any:
        """The request's model, once the caller's limits admit it, loaded, answers: through its relay if it
        is served elsewhere, else through `local` with its checked predictor. What it used is counted
        against the caller's project."""
        operation = OPERATIONS.relayed(capability)  # its row says how it is relayed and counted
        caller = await self.access.admit(self.manager.registry.resolve(request.model).id)
        model = await self.manager.get(request.model)
        predictor = model.predictor(capability)
        tally = metrics.Tally()
        with metrics.Tallied(tally):
            if isinstance(predictor, Relay):
                answer = await forwarding.forward(operation, model, predictor, request, upload)
            else:
                answer = await local(model, predictor)
        kind = operation.usage
        assert kind is not None, f"{operation.name} names no usage kind"
        if isinstance(answer, Events):
            return Events(self.access.metered(answer.items, caller, model.spec.id, kind, tally), answer.kind)
        characters = len(request.input) if isinstance(request, SpeechRequest) else 0
        self.access.settle(caller, model.spec.id, kind, tally, characters)
        return answer

    def _known(self, name: str) -> bool:
        """Whether a model of this name (an id, an alias, one of OpenAI's names) is served here."""
        try:
            self.manager.registry.resolve(name)
        except ModelNotFoundError:
            return False
        return True

    async def _batch_line(self, url: str, body: dict[str, Any]) -> object:
        """A batch's line, through the operation its `url` names, as a live request of it would run."""
        operation = OPERATIONS.batch_endpoint(url)
        if operation is None:
            raise InvalidRequestError(f"Batches do not run {url}.", param="url")
        return await operation.invoke(self, {}, body=body, whole=True)

    async def describe_model(self, name: str) -> dict[str, Any]:
        """What a model's files say it is (`Engine.describe`: a GGUF's header), read without loading it:
        Ollama's `model_info`; nothing for a model of no such files."""
        spec = self.manager.registry.resolve(name)
        return await anyio.to_thread.run_sync(spec.info) if spec.info is not None else {}

    def _model(self, model_id: str) -> Model:
        """OpenAI's model object, plus what a loaded model serves (capabilities, voices)."""
        spec = self.manager.registry.resolve(model_id)
        extra: dict[str, object] = {}
        loaded = self.manager.loaded(spec.id)
        if spec.capabilities is not None:
            extra["capabilities"] = sorted(spec.capabilities)
        extra["loaded"] = loaded is not None
        if loaded is not None:
            # What `modelport ps` shows: memory, idle time, and how long until an idle unload.
            idle = round(time.monotonic() - self.manager.last_used(loaded), 1) if loaded.slots.idle else 0.0
            keep_alive = self.manager.keep_alive_of(loaded)
            extra.update(memory_bytes=loaded.memory, idle_seconds=idle, keep_alive=keep_alive)
            if spec.source.startswith("engine llamacpp"):
                extra["engine_build"] = xllamacpp_loader.running().describe()
            chat = loaded.predictors.get(Capability.CHAT)
            sees = isinstance(chat, Predictor) and "image" in chat.media
            if isinstance(chat, Predictor) and chat.chat_format != PLAIN:
                # How the model writes its calls and its thinking, as modelport reads them.
                extra["chat_format"] = chat.chat_format.describe()
            extra["capabilities"] = sorted(loaded.predictors) + (["vision"] if sees else [])
            completes = loaded.predictors.get(Capability.COMPLETION)
            if isinstance(completes, Predictor) and completes.fills_in_the_middle:
                extra["fill_in_the_middle"] = True  # `suffix` (Ollama's apps read it as `insert`)
            voiced = loaded.predictors.get(Capability.SPEECH)
            if voiced is not None:
                # `instructions` is accepted by the speech endpoint but no engine here can follow it.
                extra.update(voices=list(voiced.voices), supports_instructions=False)
        return Model.model_validate(
            {"id": spec.id, "created": self._created, "object": "model", "owned_by": spec.owned_by, **extra}
        )
