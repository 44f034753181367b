"""The operation table: every endpoint of OpenAI's API that modelport serves, one row each, and the call
that serves it. Adding an endpoint is one row here and one method of the service; the HTTP routes, the
in-process client, batch lines and Ray derive from the rows (`operations` says how a row reads)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from openai.types import Completion, CreateEmbeddingResponse
from openai.types.audio import Transcription, TranscriptionVerbose
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from modelport.errors import InvalidRequestError
from modelport.predictors.contract import Capability
from modelport.predictors.relay import Upload
from modelport.protocol.admin_requests import (
    KeyCreate,
    ProjectCreate,
    ProjectLimits,
    ProjectModify,
    RateLimitUpdate,
)
from modelport.protocol.answers import Binary, ListPage
from modelport.protocol.event_kinds import (
    CHAT_CHUNKS,
    COMPLETION_CHUNKS,
    SPEECH_EVENTS,
    TRANSCRIPT_EVENTS,
)
from modelport.protocol.organization import LimitedProject, ProjectKey
from modelport.protocol.requests import (
    BatchCreate,
    ChatCompletionRequest,
    ClientSecretCreate,
    CompletionRequest,
    ConversationCreate,
    ConversationItemsCreate,
    EmbeddingRequest,
    FileUpload,
    MetadataUpdate,
    SpeechRequest,
    TranscriptionRequest,
)
from modelport.protocol.response_request import CompactRequest, InputTokensRequest, ResponseRequest
from modelport.protocol.vector_requests import (
    FileBatchCreate,
    VectorStoreCreate,
    VectorStoreFileCreate,
    VectorStoreFileUpdate,
    VectorStoreSearch,
    VectorStoreUpdate,
)
from modelport.service.operations import (
    FilePart,
    Method,
    Operation,
    OperationTable,
    QueryItems,
    Relayed,
)

if TYPE_CHECKING:
    from modelport.service import Service


def _listed(query: QueryItems, name: str) -> list[str]:
    """A list in the query string, as `name=a&name=b` or as the SDKs send it, `name[]=a&name[]=b`."""
    return [value for key, value in query if key in (name, f"{name}[]")]


def _filter(query: QueryItems, name: str) -> dict[str, str]:
    """`name[key]=value` items as a dict."""
    start = f"{name}["
    return {
        key[len(start) : -1]: value for key, value in query if key.startswith(start) and key.endswith("]")
    }


# Models, generation, embeddings, audio.


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


# Stored chat completions.


async def list_chat_completions(
    service: Service,
    query: QueryItems,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    model: str | None = None,
) -> object:
    """Stored chat completions, oldest first; `metadata[key]=value` filters."""
    metadata = _filter(query, "metadata")
    return await service.stored.list(after=after, limit=limit, order=order, model=model, metadata=metadata)


async def retrieve_chat_completion(service: Service, completion_id: str) -> object:
    """A stored chat completion, with its metadata and input messages."""
    return await service.stored.retrieve(completion_id)


async def list_chat_completion_messages(
    service: Service,
    completion_id: str,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> object:
    """The messages of a stored chat completion's request."""
    return await service.stored.messages(completion_id, after=after, limit=limit, order=order)


async def update_chat_completion(service: Service, completion_id: str, body: MetadataUpdate) -> object:
    """Replace a stored chat completion's metadata."""
    return await service.stored.update(completion_id, body.metadata)


async def delete_chat_completion(service: Service, completion_id: str) -> object:
    """Delete a stored chat completion."""
    return await service.stored.delete(completion_id)


# The Responses API.


async def create_response(service: Service, body: ResponseRequest) -> object:
    """A model response: whole, streamed as typed events, or queued in the background."""
    return await service.responses.create(body)


async def count_input_tokens(service: Service, body: InputTokensRequest) -> object:
    """The input tokens a `POST /v1/responses` with this body would use, counted by the model itself."""
    return await service.responses.input_tokens(body)


async def compact_response(service: Service, body: CompactRequest) -> object:
    """A long conversation shrunk into its user messages and one compaction item (the model's summary of
    the rest), for a later turn's input."""
    return await service.responses.compact(body)


async def retrieve_response(
    service: Service, response_id: str, stream: bool = False, starting_after: int | None = None
) -> object:
    """A stored response; with `stream=true`, its events (after `starting_after`)."""
    return await service.responses.retrieve(response_id, stream, starting_after)


async def delete_response(service: Service, response_id: str) -> object:
    """Delete a stored response."""
    return await service.responses.delete(response_id)


async def cancel_response(service: Service, response_id: str) -> object:
    """Cancel a background response."""
    return await service.responses.cancel(response_id)


async def list_response_input_items(
    service: Service,
    response_id: str,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> object:
    """The input items of a stored response."""
    return await service.responses.input_items(response_id, after=after, limit=limit, order=order)


# Conversations.


async def create_conversation(service: Service, body: ConversationCreate) -> object:
    """A new conversation, with up to 20 first items."""
    return await service.responses.conversations.create(body.items, body.metadata)


async def retrieve_conversation(service: Service, conversation_id: str) -> object:
    """One conversation."""
    return await service.responses.conversations.retrieve(conversation_id)


async def update_conversation(service: Service, conversation_id: str, body: MetadataUpdate) -> object:
    """Replace a conversation's metadata."""
    return await service.responses.conversations.update(conversation_id, body.metadata)


async def delete_conversation(service: Service, conversation_id: str) -> object:
    """Delete a conversation and its items."""
    return await service.responses.conversations.delete(conversation_id)


async def list_conversation_items(
    service: Service,
    conversation_id: str,
    query: QueryItems,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> object:
    """A conversation's items, newest first unless `order=asc`."""
    return await service.responses.conversations.items(
        conversation_id, after=after, limit=limit, order=order, include=_listed(query, "include")
    )


async def create_conversation_items(
    service: Service, conversation_id: str, body: ConversationItemsCreate
) -> object:
    """Append up to 20 items."""
    return await service.responses.conversations.add(conversation_id, body.items)


async def retrieve_conversation_item(service: Service, conversation_id: str, item_id: str) -> object:
    """One item of a conversation."""
    return await service.responses.conversations.item(conversation_id, item_id)


async def delete_conversation_item(service: Service, conversation_id: str, item_id: str) -> object:
    """Remove one item; the conversation."""
    return await service.responses.conversations.delete_item(conversation_id, item_id)


# Files and batches.


async def create_file(service: Service, body: FileUpload, upload: FilePart) -> object:
    """Upload a file (a batch's input: JSONL, checked line by line)."""
    return await service.files.create(upload.source, upload.name, body.purpose, body.expires_after)


async def list_files(
    service: Service,
    after: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    purpose: str | None = None,
) -> object:
    """Uploaded files, newest first."""
    return await service.files.list(after=after, limit=limit, order=order, purpose=purpose)


async def retrieve_file(service: Service, file_id: str) -> object:
    """One file's record."""
    return await service.files.retrieve(file_id)


async def retrieve_file_content(service: Service, file_id: str) -> object:
    """A file's bytes."""
    return await service.files.content(file_id)


async def delete_file(service: Service, file_id: str) -> object:
    """Delete a file."""
    return await service.files.delete(file_id)


async def create_batch(service: Service, body: BatchCreate) -> object:
    """Run a file of requests in the background."""
    return await service.batches.create(**body.model_dump())


async def list_batches(service: Service, after: str | None = None, limit: int | None = None) -> object:
    """Batches, newest first."""
    return await service.batches.list(after=after, limit=limit)


async def retrieve_batch(service: Service, batch_id: str) -> object:
    """A batch's state and counts."""
    return await service.batches.retrieve(batch_id)


async def cancel_batch(service: Service, batch_id: str) -> object:
    """Stop a batch; what it did is kept."""
    return await service.batches.cancel(batch_id)


# Vector stores.


async def create_vector_store(service: Service, body: VectorStoreCreate) -> object:
    """A new vector store; its files are ingested in the background."""
    return await service.vector_stores.create(body)


async def list_vector_stores(
    service: Service,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str | None = None,
) -> object:
    """The caller's vector stores, newest first unless `order=asc`."""
    return await service.vector_stores.list_stores(after=after, before=before, limit=limit, order=order)


async def retrieve_vector_store(service: Service, vector_store_id: str) -> object:
    """One vector store."""
    return await service.vector_stores.retrieve(vector_store_id)


async def update_vector_store(service: Service, vector_store_id: str, body: VectorStoreUpdate) -> object:
    """Change a vector store's name, metadata or expiry."""
    return await service.vector_stores.update(vector_store_id, body)


async def delete_vector_store(service: Service, vector_store_id: str) -> object:
    """Delete a vector store (its files stay in the Files API)."""
    return await service.vector_stores.delete(vector_store_id)


async def search_vector_store(service: Service, vector_store_id: str, body: VectorStoreSearch) -> object:
    """Hybrid search of a vector store."""
    return await service.vector_stores.search(vector_store_id, body)


async def create_vector_store_file(
    service: Service, vector_store_id: str, body: VectorStoreFileCreate
) -> object:
    """Put a file into a vector store."""
    return await service.vector_stores.attach(
        vector_store_id, body.file_id, body.attributes, body.chunking_strategy
    )


async def list_vector_store_files(
    service: Service,
    vector_store_id: str,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    filter: str | None = None,
) -> object:
    """A vector store's files, by status with `filter`."""
    return await service.vector_stores.list_files(
        vector_store_id, status=filter, after=after, before=before, limit=limit, order=order
    )


async def retrieve_vector_store_file(service: Service, vector_store_id: str, file_id: str) -> object:
    """One file of a vector store."""
    return await service.vector_stores.file(vector_store_id, file_id)


async def update_vector_store_file(
    service: Service, vector_store_id: str, file_id: str, body: VectorStoreFileUpdate
) -> object:
    """Replace a file's attributes."""
    return await service.vector_stores.update_file(vector_store_id, file_id, body.attributes)


async def delete_vector_store_file(service: Service, vector_store_id: str, file_id: str) -> object:
    """Take a file out of a vector store."""
    return await service.vector_stores.detach(vector_store_id, file_id)


async def retrieve_vector_store_file_content(service: Service, vector_store_id: str, file_id: str) -> object:
    """A file's chunks, as the store holds them."""
    return await service.vector_stores.file_content(vector_store_id, file_id)


async def create_file_batch(service: Service, vector_store_id: str, body: FileBatchCreate) -> object:
    """Several files into a vector store, followed as one batch."""
    return await service.vector_stores.create_batch(vector_store_id, body)


async def retrieve_file_batch(service: Service, vector_store_id: str, batch_id: str) -> object:
    """One file batch."""
    return await service.vector_stores.batch(vector_store_id, batch_id)


async def cancel_file_batch(service: Service, vector_store_id: str, batch_id: str) -> object:
    """Cancel what of a file batch is not yet ingested."""
    return await service.vector_stores.cancel_batch(vector_store_id, batch_id)


async def list_file_batch_files(
    service: Service,
    vector_store_id: str,
    batch_id: str,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str | None = None,
    filter: str | None = None,
) -> object:
    """A file batch's files."""
    return await service.vector_stores.list_files(
        vector_store_id,
        batch_id=batch_id,
        status=filter,
        after=after,
        before=before,
        limit=limit,
        order=order,
    )


# The organization API (admin keys only), in the shapes of OpenAI's Admin and Usage APIs.


def _limits(given: ProjectLimits | None) -> dict[str, Any] | None:
    return None if given is None else given.model_dump(exclude_none=True)


def _page(data: Sequence[LimitedProject | ProjectKey], after: str | None, limit: int) -> ListPage[Any]:
    if not 1 <= limit <= 100:
        raise InvalidRequestError("limit must be between 1 and 100.", param="limit")
    ids = [item.id for item in data]
    start = ids.index(after) + 1 if after in ids else 0
    return ListPage(list(data[start : start + limit]), has_more=start + limit < len(data))


async def list_projects(
    service: Service, after: str | None = None, limit: int = 20, include_archived: bool = False
) -> object:
    """Every project, oldest first."""
    return _page(await service.access.admin.projects(include_archived), after, limit)


async def create_project(service: Service, body: ProjectCreate) -> object:
    """A new project."""
    return await service.access.admin.create_project(body.name, _limits(body.limits))


async def retrieve_project(service: Service, project_id: str) -> object:
    """One project."""
    return await service.access.admin.project(project_id)


async def modify_project(service: Service, project_id: str, body: ProjectModify) -> object:
    """Rename a project or replace its limits."""
    return await service.access.admin.modify_project(project_id, name=body.name, limits=_limits(body.limits))


async def archive_project(service: Service, project_id: str) -> object:
    """Archive a project: its keys stop working."""
    return await service.access.admin.archive_project(project_id)


async def list_project_keys(
    service: Service, project_id: str, after: str | None = None, limit: int = 20
) -> object:
    """A project's keys (never the keys themselves)."""
    return _page(await service.access.admin.key_list(project_id), after, limit)


async def create_project_key(service: Service, project_id: str, body: KeyCreate) -> object:
    """A new key of the project; `value` holds the key, shown this once."""
    return await service.access.admin.create_key(
        project_id,
        name=body.name,
        admin=body.role == "admin",
        expires_days=body.expires_in_days,
        limits=_limits(body.limits),
    )


async def retrieve_project_key(service: Service, project_id: str, key_id: str) -> object:
    """One key of the project."""
    return await service.access.admin.key(key_id, project_id)


async def delete_project_key(service: Service, project_id: str, key_id: str) -> object:
    """Revoke a key."""
    return await service.access.admin.revoke_key(key_id, project_id)


async def list_project_rate_limits(service: Service, project_id: str) -> object:
    """The project's limits: `rl-*` for all its requests, `rl-<model>` per model."""
    return ListPage(await service.access.admin.rate_limits(project_id), has_more=False)


async def update_project_rate_limit(
    service: Service, project_id: str, rate_limit_id: str, body: RateLimitUpdate
) -> object:
    """Set one of the project's limits."""
    return await service.access.admin.update_rate_limit(
        project_id, rate_limit_id, body.max_requests_per_1_minute, body.max_tokens_per_1_minute
    )


async def usage(
    service: Service,
    kind: str,
    query: QueryItems,
    start_time: int,
    end_time: int | None = None,
    bucket_width: str = "1d",
    limit: int | None = None,
    page: str | None = None,
) -> object:
    """Usage per time bucket (`completions`, `embeddings`, `audio_speeches`, `audio_transcriptions`,
    `images`), as OpenAI's Usage API answers. Lists (`project_ids`, `models`, `group_by`) come as repeated
    parameters, with or without `[]` (the SDKs send them with)."""
    return await service.access.meter.page(
        kind,
        start_time=start_time,
        end_time=end_time,
        bucket_width=bucket_width,
        project_ids=_listed(query, "project_ids") or None,
        models=_listed(query, "models") or None,
        group_by=_listed(query, "group_by") or None,
        limit=limit,
        page=page,
    )


def _transcript_type(request: TranscriptionRequest) -> type[BaseModel]:
    return TranscriptionVerbose if request.response_format == "verbose_json" else Transcription


# A transcript is JSON of the type its format asks for, its events, or text (`text`, `srt`, `vtt`); the
# transcript's JSON does not name its model.
_TRANSCRIPT = Relayed(_transcript_type, "text", TRANSCRIPT_EVENTS, binary=True, named_model=False)


def _rows() -> list[Operation]:
    chat, completion, embedding = Capability.CHAT, Capability.COMPLETION, Capability.EMBEDDING
    get: Method = "GET"
    post: Method = "POST"
    delete: Method = "DELETE"
    vs, org = "/vector_stores/{vector_store_id}", "/organization/projects/{project_id}"
    return [
        Operation("models.list", get, "/models", list_models),
        Operation("models.retrieve", get, "/models/{model_id:path}", retrieve_model),
        Operation("chat.completions.create", post, "/chat/completions", create_chat_completion, chat,
                  relayed=Relayed(lambda _: ChatCompletion, "choices", CHAT_CHUNKS, chunks=True),
                  usage="completions", batchable=True, stored=True, local_files="messages"),
        Operation("chat.completions.list", get, "/chat/completions", list_chat_completions, stored=True),
        Operation("chat.completions.retrieve", get, "/chat/completions/{completion_id}",
                  retrieve_chat_completion, stored=True),
        Operation("chat.completions.messages.list", get, "/chat/completions/{completion_id}/messages",
                  list_chat_completion_messages, stored=True),
        Operation("chat.completions.update", post, "/chat/completions/{completion_id}",
                  update_chat_completion, stored=True),
        Operation("chat.completions.delete", delete, "/chat/completions/{completion_id}",
                  delete_chat_completion, stored=True),
        Operation("completions.create", post, "/completions", create_completion, completion,
                  relayed=Relayed(lambda _: Completion, "choices", COMPLETION_CHUNKS, chunks=True),
                  usage="completions", batchable=True),
        Operation("embeddings.create", post, "/embeddings", create_embeddings, embedding,
                  relayed=Relayed(lambda _: CreateEmbeddingResponse, "data"), usage="embeddings",
                  batchable=True),
        Operation("audio.speech.create", post, "/audio/speech", create_speech, Capability.SPEECH,
                  relayed=Relayed(None, events=SPEECH_EVENTS, binary=True), usage="audio_speeches"),
        Operation("audio.voices.list", get, "/audio/voices", list_voices),
        Operation("realtime.client_secrets.create", post, "/realtime/client_secrets", create_client_secret),
        Operation("realtime.calls.hangup", post, "/realtime/calls/{call_id}/hangup", hang_up_call,
                  session=True),
        Operation("realtime.calls.accept", post, "/realtime/calls/{call_id}/accept", accept_call,
                  session=True),
        Operation("realtime.calls.reject", post, "/realtime/calls/{call_id}/reject", reject_call,
                  session=True),
        Operation("realtime.calls.refer", post, "/realtime/calls/{call_id}/refer", refer_call, session=True),
        Operation("audio.transcriptions.create", post, "/audio/transcriptions", create_transcription,
                  Capability.TRANSCRIPTION, relayed=_TRANSCRIPT, usage="audio_transcriptions", bound="audio"),
        Operation("audio.translations.create", post, "/audio/translations", create_translation,
                  Capability.TRANSLATION, relayed=_TRANSCRIPT, usage="audio_transcriptions", bound="audio"),
        Operation("responses.create", post, "/responses", create_response, chat, batchable=True, stored=True,
                  local_files="input"),
        Operation("responses.input_tokens.count", post, "/responses/input_tokens", count_input_tokens, chat),
        Operation("responses.compact", post, "/responses/compact", compact_response, chat),
        Operation("responses.retrieve", get, "/responses/{response_id}", retrieve_response, stored=True),
        Operation("responses.delete", delete, "/responses/{response_id}", delete_response, stored=True),
        Operation("responses.cancel", post, "/responses/{response_id}/cancel", cancel_response, stored=True),
        Operation("responses.input_items.list", get, "/responses/{response_id}/input_items",
                  list_response_input_items, stored=True),
        Operation("conversations.create", post, "/conversations", create_conversation, stored=True),
        Operation("conversations.retrieve", get, "/conversations/{conversation_id}",
                  retrieve_conversation, stored=True),
        Operation("conversations.update", post, "/conversations/{conversation_id}",
                  update_conversation, stored=True),
        Operation("conversations.delete", delete, "/conversations/{conversation_id}",
                  delete_conversation, stored=True),
        Operation("conversations.items.list", get, "/conversations/{conversation_id}/items",
                  list_conversation_items, stored=True),
        Operation("conversations.items.create", post, "/conversations/{conversation_id}/items",
                  create_conversation_items, stored=True),
        Operation("conversations.items.retrieve", get, "/conversations/{conversation_id}/items/{item_id}",
                  retrieve_conversation_item, stored=True),
        Operation("conversations.items.delete", delete, "/conversations/{conversation_id}/items/{item_id}",
                  delete_conversation_item, stored=True),
        Operation("files.create", post, "/files", create_file, stored=True, bound="files"),
        Operation("files.list", get, "/files", list_files, stored=True),
        Operation("files.retrieve", get, "/files/{file_id}", retrieve_file, stored=True),
        Operation("files.content", get, "/files/{file_id}/content", retrieve_file_content, stored=True),
        Operation("files.delete", delete, "/files/{file_id}", delete_file, stored=True),
        Operation("batches.create", post, "/batches", create_batch, stored=True),
        Operation("batches.list", get, "/batches", list_batches, stored=True),
        Operation("batches.retrieve", get, "/batches/{batch_id}", retrieve_batch, stored=True),
        Operation("batches.cancel", post, "/batches/{batch_id}/cancel", cancel_batch, stored=True),
        Operation("vector_stores.create", post, "/vector_stores", create_vector_store, stored=True),
        Operation("vector_stores.list", get, "/vector_stores", list_vector_stores, stored=True),
        Operation("vector_stores.retrieve", get, vs, retrieve_vector_store, stored=True),
        Operation("vector_stores.update", post, vs, update_vector_store, stored=True),
        Operation("vector_stores.delete", delete, vs, delete_vector_store, stored=True),
        Operation("vector_stores.search", post, f"{vs}/search", search_vector_store, stored=True),
        Operation("vector_stores.files.create", post, f"{vs}/files", create_vector_store_file, stored=True),
        Operation("vector_stores.files.list", get, f"{vs}/files", list_vector_store_files, stored=True),
        Operation("vector_stores.files.retrieve", get, f"{vs}/files/{{file_id}}",
                  retrieve_vector_store_file, stored=True),
        Operation("vector_stores.files.update", post, f"{vs}/files/{{file_id}}",
                  update_vector_store_file, stored=True),
        Operation("vector_stores.files.delete", delete, f"{vs}/files/{{file_id}}",
                  delete_vector_store_file, stored=True),
        Operation("vector_stores.files.content", get, f"{vs}/files/{{file_id}}/content",
                  retrieve_vector_store_file_content, stored=True),
        Operation("vector_stores.file_batches.create", post, f"{vs}/file_batches", create_file_batch,
                  stored=True),
        Operation("vector_stores.file_batches.retrieve", get, f"{vs}/file_batches/{{batch_id}}",
                  retrieve_file_batch, stored=True),
        Operation("vector_stores.file_batches.cancel", post, f"{vs}/file_batches/{{batch_id}}/cancel",
                  cancel_file_batch, stored=True),
        Operation("vector_stores.file_batches.list_files", get, f"{vs}/file_batches/{{batch_id}}/files",
                  list_file_batch_files, stored=True),
        Operation("admin.projects.list", get, "/organization/projects", list_projects, admin=True),
        Operation("admin.projects.create", post, "/organization/projects", create_project, admin=True),
        Operation("admin.projects.retrieve", get, org, retrieve_project, admin=True),
        Operation("admin.projects.update", post, org, modify_project, admin=True),
        Operation("admin.projects.archive", post, f"{org}/archive", archive_project, admin=True),
        Operation("admin.projects.api_keys.list", get, f"{org}/api_keys", list_project_keys, admin=True),
        Operation("admin.projects.api_keys.create", post, f"{org}/api_keys", create_project_key, admin=True),
        Operation("admin.projects.api_keys.retrieve", get, f"{org}/api_keys/{{key_id}}",
                  retrieve_project_key, admin=True),
        Operation("admin.projects.api_keys.delete", delete, f"{org}/api_keys/{{key_id}}",
                  delete_project_key, admin=True),
        Operation("admin.projects.rate_limits.list", get, f"{org}/rate_limits", list_project_rate_limits,
                  admin=True),
        Operation("admin.projects.rate_limits.update", post, f"{org}/rate_limits/{{rate_limit_id}}",
                  update_project_rate_limit, admin=True),
        Operation("admin.usage", get, "/organization/usage/{kind}", usage, admin=True),
    ]  # fmt: skip


OPERATIONS = OperationTable(_rows())
# What a Batch API line may name, as its `url`.
BATCH_ENDPOINTS = tuple(op.route for op in OPERATIONS if op.batchable)
