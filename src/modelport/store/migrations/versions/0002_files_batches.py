"""Files and batches.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("filename", sa.String(512), nullable=False),
        sa.Column("purpose", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=True),
    )
    op.create_index("ix_files_created_id", "files", ["created", "id"])
    op.create_index("ix_files_purpose_created_id", "files", ["purpose", "created", "id"])
    op.create_table(
        "batches",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(64), nullable=True),
        sa.Column("heartbeat", sa.BigInteger, nullable=True),
        sa.Column("batch", sa.JSON, nullable=False),
    )
    op.create_index("ix_batches_status", "batches", ["status"])
    op.create_index("ix_batches_created_id", "batches", ["created", "id"])
    op.create_table(
        "batch_results",
        sa.Column(
            "batch_id", sa.String(128), sa.ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("line", sa.Integer, primary_key=True),
        sa.Column("ok", sa.Boolean, nullable=False),
        sa.Column("output", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("batch_results")
    op.drop_table("batches")
    op.drop_table("files")
