"""The tables: what a filter or a page walks on is a real, indexed column; the rest is JSON."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
)

metadata = MetaData()

# Stored chat completions: the answer, the request's messages and parameters, and `metadata`.
chat_completions = Table(
    "chat_completions",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("model", String(256), nullable=False),
    Column("status", String(16), nullable=False),  # completed, or incomplete (the client left mid-stream)
    Column("metadata", JSON, nullable=False),
    Column("request", JSON, nullable=False),  # messages and parameters, as the client sent them
    Column("completion", JSON, nullable=False),  # the ChatCompletion
    Index("ix_chat_completions_created_id", "created", "id"),
    Index("ix_chat_completions_model_created_id", "model", "created", "id"),
)

# `metadata[key]=value` filters look rows up here, by an index, instead of scanning JSON.
chat_completion_metadata = Table(
    "chat_completion_metadata",
    metadata,
    Column(
        "completion_id",
        String(128),
        ForeignKey("chat_completions.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("key", String(64), primary_key=True),
    Column("value", String(512), nullable=False),
    Index("ix_chat_completion_metadata_key_value", "key", "value", "completion_id"),
)

# Responses: each row is one turn; `previous_response_id` chains them into a conversation.
responses = Table(
    "responses",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("model", String(256), nullable=False),
    Column(
        "status", String(16), nullable=False
    ),  # queued, in_progress, completed, incomplete, failed, cancelled
    Column("previous_response_id", String(128), nullable=True, index=True),
    Column("background", Boolean, nullable=False),
    Column("heartbeat", BigInteger, nullable=True),  # last sign of life of a background job (unix seconds)
    Column("metadata", JSON, nullable=False),
    Column("request", JSON, nullable=False),  # the parameters, less `input`
    Column("input_items", JSON, nullable=False),  # this turn's input items, with their ids
    Column("response", JSON, nullable=False),  # the Response object as last known
    Index("ix_responses_created_id", "created", "id"),
)

# The events of a background response, kept so a client can resume its stream (`starting_after`).
response_events = Table(
    "response_events",
    metadata,
    Column("response_id", String(128), ForeignKey("responses.id", ondelete="CASCADE"), primary_key=True),
    Column("sequence_number", Integer, primary_key=True),
    Column("event", JSON, nullable=False),
)

# Uploaded files: the bytes live on disk under the files folder, named by id; what lists filter on is here.
files = Table(
    "files",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("filename", String(512), nullable=False),
    Column("purpose", String(64), nullable=False),
    Column("expires_at", BigInteger, nullable=True),
    Index("ix_files_created_id", "created", "id"),
    Index("ix_files_purpose_created_id", "purpose", "created", "id"),
)

# Batches: the Batch object as JSON, and which replica runs it (a lease renewed by its heartbeat).
batches = Table(
    "batches",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("created", BigInteger, nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("owner", String(64), nullable=True),
    Column("heartbeat", BigInteger, nullable=True),
    Column("batch", JSON, nullable=False),
    Index("ix_batches_created_id", "created", "id"),
)

# A batch's progress, line by line: a line with a result here is never run again, even after a restart.
batch_results = Table(
    "batch_results",
    metadata,
    Column("batch_id", String(128), ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True),
    Column("line", Integer, primary_key=True),
    Column("ok", Boolean, nullable=False),
    Column("output", JSON, nullable=False),  # the line of the output or error file
)
