"""Models, generation, embeddings, audio and realtime calls: each endpoint's call into the service."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelport.predictors.relay import Upload
from modelport.protocol.answers import Binary
from modelport.protocol.requests import (
    ChatCompletionRequest,
    ClientSecretCreate,
    CompletionRequest,
    EmbeddingRequest,
    SpeechRequest,
    TranscriptionRequest,
)
from modelport.service.operations import FilePart

if TYPE_CHECKING:
    from modelport.service import Service


async def list_models(service: Service, loaded: bool = False) -> dict[str, Any]:
    """The served models (`?loaded=true`: only those loaded now, as `modelport ps` shows them)."""
    return {"object": "list", "data": await service.list_models(loaded=loaded)}


async def retrieve_model(service: Service, model_id: str) -> object:
    """One model by id or alias."""
    return service.retrieve_model(model_id)


async def create_chat_completion(service: Service, body: ChatCompletionRequest) -> object:
    """A chat completion, whole or streamed as server-sent events."""
    return await service.chat_completion(body)


async def create_completion(service: Service, body: CompletionRequest) -> object:
    """A legacy text completion, whole or streamed."""
    return await service.completion(body)


async def create_embeddings(service: Service, body: EmbeddingRequest) -> object:
    """Embeddings, as floats or base64 little-endian float32."""
    return await service.embeddings(body)


async def create_speech(service: Service, body: SpeechRequest, whole: bool = False) -> object:
    """Text to speech: audio chunks (or SSE events) as they are synthesised; a file with its exact sizes
    where it is read whole."""
    return await service.speech(body, whole=whole)


async def list_voices(service: Service, model: str) -> dict[str, Any]:
    """The voices of a speech model (OpenAI's voice names are accepted too and map onto these)."""
    names = await service.voices(model)
    resolved = service.retrieve_model(model).id
    return {
        "object": "list",
        "data": [{"id": voice, "object": "voice", "model": resolved} for voice in names],
    }


async def create_client_secret(service: Service, body: ClientSecretCreate) -> object:
    """A realtime client secret (`ek_…`) for the caller's project: a browser or phone opens a realtime
    session with it (a WebRTC call or a WebSocket), configured as `session` says, until it expires."""
    return await service.realtime.client_secret(body)


async def hang_up_call(service: Service, call_id: str) -> Binary:
    """End a WebRTC call of the caller's project (the caller may be the call's own client secret)."""
    await service.realtime.calls.hang_up(call_id)
    return Binary("text/plain; charset=utf-8")


async def accept_call(service: Service, call_id: str) -> object:
    """For an incoming SIP call, which this server does not take: a 400 that says so."""
    service.realtime.calls.sip_only(call_id, "accept")


async def reject_call(service: Service, call_id: str) -> object:
    """For an incoming SIP call, which this server does not take: a 400 that says so."""
    service.realtime.calls.sip_only(call_id, "reject")


async def refer_call(service: Service, call_id: str) -> object:
    """For an incoming SIP call, which this server does not take: a 400 that says so."""
    service.realtime.calls.sip_only(call_id, "refer")


async def create_transcription(service: Service, body: TranscriptionRequest, upload: FilePart) -> object:
    """Speech to text from an uploaded audio file."""
    return await service.transcription(body, Upload(upload.name, upload.source.read()))


async def create_translation(service: Service, body: TranscriptionRequest, upload: FilePart) -> object:
    """Speech in any language to English text (models that can translate)."""
    return await service.translation(body, Upload(upload.name, upload.source.read()))
