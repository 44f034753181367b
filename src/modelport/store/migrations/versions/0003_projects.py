"""Projects, API keys and usage; every stored object gets an owner project (existing rows: the default one).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

DEFAULT_PROJECT = "proj_default"  # as in modelport.store.tables, frozen here as migrations must be
OWNED = ("chat_completions", "responses", "files", "batches")


def upgrade() -> None:
    projects = op.create_table(
        "projects",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(256), nullable=False, unique=True),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("archived_at", sa.BigInteger, nullable=True),
        sa.Column("limits", sa.JSON, nullable=False),
    )
    op.bulk_insert(
        projects, [{"id": DEFAULT_PROJECT, "name": "default", "created": int(time.time()), "limits": {}}]
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("project", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False, unique=True),
        sa.Column("redacted", sa.String(64), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=True),
        sa.Column("last_used_at", sa.BigInteger, nullable=True),
        sa.Column("revoked_at", sa.BigInteger, nullable=True),
        sa.Column("limits", sa.JSON, nullable=False),
    )
    op.create_index("ix_api_keys_project", "api_keys", ["project"])
    op.create_table(
        "usage",
        sa.Column("bucket", sa.BigInteger, primary_key=True),
        sa.Column("project", sa.String(64), primary_key=True),
        sa.Column("model", sa.String(256), primary_key=True),
        sa.Column("key_id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(32), primary_key=True),
        sa.Column("requests", sa.BigInteger, nullable=False),
        sa.Column("input_tokens", sa.BigInteger, nullable=False),
        sa.Column("cached_tokens", sa.BigInteger, nullable=False),
        sa.Column("output_tokens", sa.BigInteger, nullable=False),
        sa.Column("characters", sa.BigInteger, nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("images", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_usage_project_bucket", "usage", ["project", "bucket"])
    for table in OWNED:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("project", sa.String(64), nullable=False, server_default=DEFAULT_PROJECT)
            )
        op.create_index(f"ix_{table}_project_created_id", table, ["project", "created", "id"])


def downgrade() -> None:
    for table in OWNED:
        op.drop_index(f"ix_{table}_project_created_id", table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("project")
    op.drop_table("usage")
    op.drop_table("api_keys")
    op.drop_table("projects")
