"""The operation table: every endpoint of OpenAI's API that modelport serves, one row each, and the call
that serves it (in `endpoints`, by resource). Adding an endpoint is one row here, its call and one method of
the service; the HTTP routes, the in-process client, batch lines and Ray derive from the rows (`operations`
says how a row reads)."""

from __future__ import annotations

from openai.types import Completion, CreateEmbeddingResponse
from openai.types.audio import Transcription, TranscriptionVerbose, Translation, TranslationVerbose
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from modelport.predictors.contract import Capability
from modelport.protocol.event_kinds import CHAT_CHUNKS, COMPLETION_CHUNKS, SPEECH_EVENTS, TRANSCRIPT_EVENTS
from modelport.protocol.requests import TranscriptionRequest
from modelport.service.endpoints.files import (
    add_upload_part,
    cancel_batch,
    cancel_upload,
    complete_upload,
    create_batch,
    create_file,
    create_upload,
    delete_file,
    list_batches,
    list_files,
    retrieve_batch,
    retrieve_file,
    retrieve_file_content,
)
from modelport.service.endpoints.generation import (
    accept_call,
    create_chat_completion,
    create_client_secret,
    create_completion,
    create_embeddings,
    create_speech,
    create_transcription,
    create_translation,
    hang_up_call,
    list_models,
    list_voices,
    refer_call,
    reject_call,
    retrieve_model,
)
from modelport.service.endpoints.organization import (
    archive_project,
    create_project,
    create_project_key,
    delete_project_key,
    list_project_keys,
    list_project_rate_limits,
    list_projects,
    modify_project,
    retrieve_project,
    retrieve_project_key,
    update_project_rate_limit,
    usage,
)
from modelport.service.endpoints.responses import (
    cancel_response,
    compact_response,
    count_input_tokens,
    create_conversation,
    create_conversation_items,
    create_response,
    delete_conversation,
    delete_conversation_item,
    delete_response,
    list_conversation_items,
    list_response_input_items,
    retrieve_conversation,
    retrieve_conversation_item,
    retrieve_response,
    update_conversation,
)
from modelport.service.endpoints.stored_completions import (
    delete_chat_completion,
    list_chat_completion_messages,
    list_chat_completions,
    retrieve_chat_completion,
    update_chat_completion,
)
from modelport.service.endpoints.vector_stores import (
    cancel_file_batch,
    create_file_batch,
    create_vector_store,
    create_vector_store_file,
    delete_vector_store,
    delete_vector_store_file,
    list_file_batch_files,
    list_vector_store_files,
    list_vector_stores,
    retrieve_file_batch,
    retrieve_vector_store,
    retrieve_vector_store_file,
    retrieve_vector_store_file_content,
    search_vector_store,
    update_vector_store,
    update_vector_store_file,
)
from modelport.service.operations import Method, Operation, OperationTable, Relayed


def _transcript_type(request: TranscriptionRequest) -> type[BaseModel]:
    return TranscriptionVerbose if request.response_format == "verbose_json" else Transcription


def _translation_type(request: TranscriptionRequest) -> type[BaseModel]:
    return TranslationVerbose if request.response_format == "verbose_json" else Translation


# A transcript is JSON of the type its format asks for, its events, or text (`text`, `srt`, `vtt`); the
# transcript's JSON does not name its model. A translation's, the same as OpenAI types it.
_TRANSCRIPT = Relayed(_transcript_type, "text", TRANSCRIPT_EVENTS, binary=True, named_model=False)
_TRANSLATION = Relayed(_translation_type, "text", TRANSCRIPT_EVENTS, binary=True, named_model=False)


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
                  Capability.TRANSLATION, relayed=_TRANSLATION, usage="audio_transcriptions", bound="audio"),
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
        Operation("uploads.create", post, "/uploads", create_upload, stored=True),
        Operation("uploads.parts.create", post, "/uploads/{upload_id}/parts", add_upload_part, stored=True,
                  bound="part", upload_field="data"),
        Operation("uploads.complete", post, "/uploads/{upload_id}/complete", complete_upload, stored=True),
        Operation("uploads.cancel", post, "/uploads/{upload_id}/cancel", cancel_upload, stored=True),
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
