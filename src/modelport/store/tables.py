"""The tables: what a filter or a page walks on is a real, indexed column; the rest is JSON."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
)

from modelport.context import DEFAULT_PROJECT
from modelport.store.text_columns import NulFreeString, NulFreeText
from modelport.store.vector_column import Embedding

metadata = MetaData()


def _owner() -> Column[str]:
    """Every stored object belongs to one project: the project of the key that made it. Rows made before
    projects existed, or by the keys of `--api-key`, belong to the default one."""
    return Column("project", NulFreeString(64), nullable=False, server_default=DEFAULT_PROJECT)


projects = Table(
    "projects",
    metadata,
    Column("id", NulFreeString(64), primary_key=True),
    Column("name", NulFreeString(256), nullable=False, unique=True),
    Column("created", BigInteger, nullable=False),
    Column("archived_at", BigInteger, nullable=True),
    Column("limits", JSON, nullable=False),  # requests and tokens per minute, allowed models
)

# API keys: only a hash of each key is kept (keys are random, so SHA-256 is enough to make a stolen
# database useless for calling the server), and the first and last characters, to tell keys apart.
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", NulFreeString(64), primary_key=True),
    Column("project", NulFreeString(64), ForeignKey("projects.id"), nullable=False, index=True),
    Column("hash", NulFreeString(64), nullable=False, unique=True),
    Column("redacted", NulFreeString(64), nullable=False),
    Column("name", NulFreeString(256), nullable=False),
    Column("role", NulFreeString(16), nullable=False),  # member, or admin (the organization API too)
    Column("created", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=True),
    Column("last_used_at", BigInteger, nullable=True),
    Column("revoked_at", BigInteger, nullable=True),
    Column("limits", JSON, nullable=False),
)

# Realtime client secrets (ephemeral keys, `ek_…`): minted by a key for a browser or phone to open one kind of
# session with; kept as hashes like API keys, with the project and key that minted them and the session
# configuration they carry, until they expire.
client_secrets = Table(
    "client_secrets",
    metadata,
    Column("hash", NulFreeString(64), primary_key=True),
    _owner(),
    Column(
        "key_id", NulFreeString(64), nullable=True
    ),  # the minting key; None for `--api-key` keys and tokens
    Column("session", JSON, nullable=False),
    Column("created", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False, index=True),
)

# What each project used, per minute: one row per (minute, project, model, key, kind), added to in batches.
usage = Table(
    "usage",
    metadata,
    Column("bucket", BigInteger, primary_key=True),  # the minute's start, unix seconds
    Column("project", NulFreeString(64), primary_key=True),
    Column("model", NulFreeString(256), primary_key=True),
    Column("key_id", NulFreeString(64), primary_key=True),  # "" for requests made without a stored key
    Column("kind", NulFreeString(32), primary_key=True),  # completions, embeddings, audio_speeches, ...
    Column("requests", BigInteger, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("cached_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("characters", BigInteger, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("images", BigInteger, nullable=False),
    Index("ix_usage_project_bucket", "project", "bucket"),
)

# Stored chat completions: the answer, the request's messages and parameters, and `metadata`.
chat_completions = Table(
    "chat_completions",
    metadata,
    Column("id", NulFreeString(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("model", NulFreeString(256), nullable=False),
    Column(
        "status", NulFreeString(16), nullable=False
    ),  # completed, or incomplete (the client left mid-stream)
    Column("metadata", JSON, nullable=False),
    Column("request", JSON, nullable=False),  # messages and parameters, as the client sent them
    Column("completion", JSON, nullable=False),  # the ChatCompletion
    _owner(),
    Index("ix_chat_completions_created_id", "created", "id"),
    Index("ix_chat_completions_model_created_id", "model", "created", "id"),
    Index("ix_chat_completions_project_created_id", "project", "created", "id"),
)

# `metadata[key]=value` filters look rows up here, by an index, instead of scanning JSON.
chat_completion_metadata = Table(
    "chat_completion_metadata",
    metadata,
    Column(
        "completion_id",
        NulFreeString(128),
        ForeignKey("chat_completions.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("key", NulFreeString(64), primary_key=True),
    Column("value", NulFreeString(512), nullable=False),
    Index("ix_chat_completion_metadata_key_value", "key", "value", "completion_id"),
)

# Responses: each row is one turn; `previous_response_id` chains them into a conversation.
responses = Table(
    "responses",
    metadata,
    Column("id", NulFreeString(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("model", NulFreeString(256), nullable=False),
    Column(
        "status", NulFreeString(16), nullable=False
    ),  # queued, in_progress, completed, incomplete, failed, cancelled
    Column("previous_response_id", NulFreeString(128), nullable=True, index=True),
    Column("background", Boolean, nullable=False),
    Column("heartbeat", BigInteger, nullable=True),  # last sign of life of a background job (unix seconds)
    Column("metadata", JSON, nullable=False),
    Column("request", JSON, nullable=False),  # the parameters, less `input`
    Column("input_items", JSON, nullable=False),  # this turn's input items, with their ids
    Column("response", JSON, nullable=False),  # the Response object as last known
    _owner(),
    Index("ix_responses_created_id", "created", "id"),
    Index("ix_responses_project_created_id", "project", "created", "id"),
)

# Which response holds an item (its input or output) by the item's id: what an `item_reference` input item
# is looked up by. An id a client gave may be in several responses (a turn's input given again).
response_items = Table(
    "response_items",
    metadata,
    Column("item_id", NulFreeString(128), primary_key=True),
    Column(
        "response_id", NulFreeString(128), ForeignKey("responses.id", ondelete="CASCADE"), primary_key=True
    ),
    Index("ix_response_items_response_id", "response_id"),
)

# The events of a background response, kept so a client can resume its stream (`starting_after`).
response_events = Table(
    "response_events",
    metadata,
    Column(
        "response_id", NulFreeString(128), ForeignKey("responses.id", ondelete="CASCADE"), primary_key=True
    ),
    Column("sequence_number", Integer, primary_key=True),
    Column("event", JSON, nullable=False),
)

# Uploaded files: the bytes live on disk under the files folder, named by id; what lists filter on is here.
files = Table(
    "files",
    metadata,
    Column("id", NulFreeString(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("filename", NulFreeString(512), nullable=False),
    Column("purpose", NulFreeString(64), nullable=False),
    Column("expires_at", BigInteger, nullable=True),
    _owner(),
    Index("ix_files_created_id", "created", "id"),
    Index("ix_files_purpose_created_id", "purpose", "created", "id"),
    Index("ix_files_project_created_id", "project", "created", "id"),
)

# Uploads (a file sent in parts): each part's bytes on disk under the files folder until the upload is
# completed into a file, or cancelled, or expires.
uploads = Table(
    "uploads",
    metadata,
    Column("id", NulFreeString(128), primary_key=True),
    _owner(),
    Column("created", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("status", NulFreeString(16), nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("filename", NulFreeString(512), nullable=False),
    Column("purpose", NulFreeString(64), nullable=False),
    Column("mime_type", NulFreeString(255), nullable=False),
    Column("file_expires_after", BigInteger, nullable=True),
    Column("file_id", NulFreeString(128), nullable=True),
    Index("ix_uploads_status_expires_at", "status", "expires_at"),
)

upload_parts = Table(
    "upload_parts",
    metadata,
    Column("id", NulFreeString(128), primary_key=True),
    Column("upload_id", NulFreeString(128), ForeignKey("uploads.id", ondelete="CASCADE"), nullable=False),
    Column("created", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Index("ix_upload_parts_upload_id", "upload_id"),
)

# Batches: the Batch object as JSON, and which replica runs it (a lease renewed by its heartbeat).
batches = Table(
    "batches",
    metadata,
    Column("id", NulFreeString(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("status", NulFreeString(16), nullable=False, index=True),
    Column("owner", NulFreeString(64), nullable=True),
    Column("heartbeat", BigInteger, nullable=True),
    Column("batch", JSON, nullable=False),
    _owner(),
    Index("ix_batches_created_id", "created", "id"),
    Index("ix_batches_project_created_id", "project", "created", "id"),
)

# A batch's progress, line by line: a line with a result here is never run again, even after a restart.
batch_results = Table(
    "batch_results",
    metadata,
    Column("batch_id", NulFreeString(128), ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True),
    Column("line", Integer, primary_key=True),
    Column("ok", Boolean, nullable=False),
    Column("output", JSON, nullable=False),  # the line of the output or error file
)

# Conversations: their items, in order, as the Conversations API and `conversation` on a response use them.
conversations = Table(
    "conversations",
    metadata,
    Column("id", NulFreeString(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("metadata", JSON, nullable=False),
    _owner(),
    Index("ix_conversations_project_created_id", "project", "created", "id"),
)

conversation_items = Table(
    "conversation_items",
    metadata,
    Column(
        "conversation_id",
        NulFreeString(128),
        ForeignKey("conversations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("position", BigInteger, primary_key=True),  # nanoseconds when added, + its place in the batch
    Column("id", NulFreeString(128), nullable=False),
    Column("item", JSON, nullable=False),
    Index("ix_conversation_items_item", "conversation_id", "id", unique=True),
)

# Vector stores: their files (each chunked and embedded in the background) and the chunks searched. A store
# keeps the embedding model it was made with; `version` grows with every change of its chunks, so a copy of
# its vectors held in memory knows when it is stale.
vector_stores = Table(
    "vector_stores",
    metadata,
    Column("id", NulFreeString(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("name", NulFreeString(512), nullable=True),
    Column("description", NulFreeString(512), nullable=True),
    Column("metadata", JSON, nullable=False),
    Column("model", NulFreeString(256), nullable=False),  # the embedding model
    Column("expires_after", JSON, nullable=True),
    Column("expires_at", BigInteger, nullable=True),
    Column("last_active", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    _owner(),
    Index("ix_vector_stores_project_created_id", "project", "created", "id"),
)

# A file in a vector store: `id` is the file's id; `heartbeat` is when a replica last worked on its chunks.
vector_store_files = Table(
    "vector_store_files",
    metadata,
    Column(
        "vector_store_id",
        NulFreeString(128),
        ForeignKey("vector_stores.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("id", NulFreeString(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("status", NulFreeString(16), nullable=False),
    Column("last_error", JSON, nullable=True),
    Column("attributes", JSON, nullable=False),
    Column("chunking", JSON, nullable=False),
    Column("usage_bytes", BigInteger, nullable=False),
    Column("batch_id", NulFreeString(128), nullable=True, index=True),
    Column("heartbeat", BigInteger, nullable=True),
    _owner(),
    Index("ix_vector_store_files_store_created_id", "vector_store_id", "created", "id"),
    Index("ix_vector_store_files_status", "status"),
)

vector_store_file_batches = Table(
    "vector_store_file_batches",
    metadata,
    Column("id", NulFreeString(128), primary_key=True),
    Column(
        "vector_store_id",
        NulFreeString(128),
        ForeignKey("vector_stores.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("created", BigInteger, nullable=False),
    Column("status", NulFreeString(16), nullable=False),
    _owner(),
)

# The chunks: their text (indexed for full-text search: FTS5 on SQLite, a `tsvector` on PostgreSQL) and
# their embedding (float32 bytes on SQLite, pgvector's `vector` on PostgreSQL; see the migration).
vector_chunks = Table(
    "vector_chunks",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column(
        "vector_store_id",
        NulFreeString(128),
        ForeignKey("vector_stores.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("file_id", NulFreeString(128), nullable=False),
    Column("position", Integer, nullable=False),
    Column("text", NulFreeText, nullable=False),
    Column("embedding", Embedding, nullable=False),
    Index("ix_vector_chunks_store_file", "vector_store_id", "file_id", "position"),
)

# The chunks of a file being ingested, kept as each batch is embedded (float32 bytes), out of search's way
# until the file completes: an ingest taken up after its replica stopped embeds only what is not here.
vector_chunk_drafts = Table(
    "vector_chunk_drafts",
    metadata,
    Column(
        "vector_store_id",
        NulFreeString(128),
        ForeignKey("vector_stores.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("file_id", NulFreeString(128), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("text", NulFreeText, nullable=False),
    Column("embedding", LargeBinary, nullable=False),
)
