"""Vector stores, their files and file batches, and the chunks searched.

On PostgreSQL the embeddings are pgvector's `vector` and the text has a `tsvector` for full-text search; on
SQLite the embeddings are float32 bytes and the text has an FTS5 index kept by triggers.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import VECTOR

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_PGVECTOR_MISSING = (
    "vector stores on PostgreSQL need the pgvector extension, which this PostgreSQL server does not have: "
    "install it (Debian's PostgreSQL 15: sudo ./scripts/install-pgvector; or the postgresql-15-pgvector "
    "package from apt.postgresql.org) and start modelport again"
)


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        available = op.get_bind().scalar(
            sa.text("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
        )
        if not available:
            raise sa.exc.InvalidRequestError(_PGVECTOR_MISSING)
        op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "vector_stores",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("name", sa.String(512), nullable=True),
        sa.Column("description", sa.String(512), nullable=True),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("expires_after", sa.JSON, nullable=True),
        sa.Column("expires_at", sa.BigInteger, nullable=True),
        sa.Column("last_active", sa.BigInteger, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        _owner(),
    )
    op.create_index("ix_vector_stores_project_created_id", "vector_stores", ["project", "created", "id"])
    op.create_table(
        "vector_store_files",
        sa.Column(
            "vector_store_id",
            sa.String(128),
            sa.ForeignKey("vector_stores.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("last_error", sa.JSON, nullable=True),
        sa.Column("attributes", sa.JSON, nullable=False),
        sa.Column("chunking", sa.JSON, nullable=False),
        sa.Column("usage_bytes", sa.BigInteger, nullable=False),
        sa.Column("batch_id", sa.String(128), nullable=True),
        sa.Column("heartbeat", sa.BigInteger, nullable=True),
        _owner(),
    )
    op.create_index(
        "ix_vector_store_files_store_created_id", "vector_store_files", ["vector_store_id", "created", "id"]
    )
    op.create_index("ix_vector_store_files_status", "vector_store_files", ["status"])
    op.create_index("ix_vector_store_files_batch_id", "vector_store_files", ["batch_id"])
    op.create_table(
        "vector_store_file_batches",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column(
            "vector_store_id",
            sa.String(128),
            sa.ForeignKey("vector_stores.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        _owner(),
    )
    op.create_table(
        "vector_chunks",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column(
            "vector_store_id",
            sa.String(128),
            sa.ForeignKey("vector_stores.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("file_id", sa.String(128), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("embedding", VECTOR() if postgres else sa.LargeBinary, nullable=False),
    )
    op.create_index(
        "ix_vector_chunks_store_file", "vector_chunks", ["vector_store_id", "file_id", "position"]
    )
    if postgres:
        # Vectors kept in the row, never compressed or moved out of line: a search reads every vector of a
        # store, and fetching each from TOAST made it ~10x slower at 100k chunks.
        op.execute("ALTER TABLE vector_chunks ALTER COLUMN embedding SET STORAGE PLAIN")
        op.execute(
            "ALTER TABLE vector_chunks ADD COLUMN words tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED"
        )
        op.execute("CREATE INDEX ix_vector_chunks_words ON vector_chunks USING gin (words)")
    else:
        # External content: FTS5 indexes the chunks' text without a second copy; triggers keep it in step.
        # The store's id is indexed too, so a search matches within one store (`vector_store_id : "vs_…"
        # AND …`) and is ranked without joining the chunks.
        op.execute(
            "CREATE VIRTUAL TABLE vector_chunks_fts USING fts5(text, vector_store_id, "
            "content='vector_chunks', content_rowid='id', tokenize='porter unicode61')"
        )
        op.execute(
            "CREATE TRIGGER vector_chunks_added AFTER INSERT ON vector_chunks BEGIN "
            "INSERT INTO vector_chunks_fts(rowid, text, vector_store_id) "
            "VALUES (new.id, new.text, new.vector_store_id); END"
        )
        op.execute(
            "CREATE TRIGGER vector_chunks_removed AFTER DELETE ON vector_chunks BEGIN "
            "INSERT INTO vector_chunks_fts(vector_chunks_fts, rowid, text, vector_store_id) "
            "VALUES ('delete', old.id, old.text, old.vector_store_id); END"
        )


def _owner() -> sa.Column[str]:
    return sa.Column("project", sa.String(64), nullable=False, server_default="proj_default")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        op.execute("DROP TRIGGER IF EXISTS vector_chunks_removed")
        op.execute("DROP TRIGGER IF EXISTS vector_chunks_added")
        op.execute("DROP TABLE IF EXISTS vector_chunks_fts")
    op.drop_table("vector_chunks")
    op.drop_table("vector_store_file_batches")
    op.drop_table("vector_store_files")
    op.drop_table("vector_stores")
