"""Uploads: a file sent in parts (the Uploads API), its parts' bytes on disk until it is completed.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "uploads",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("project", sa.String(64), nullable=False, server_default="proj_default"),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("filename", sa.String(512), nullable=False),
        sa.Column("purpose", sa.String(64), nullable=False),
        sa.Column("mime_type", sa.String(255), nullable=False),
        sa.Column("file_expires_after", sa.BigInteger, nullable=True),
        sa.Column("file_id", sa.String(128), nullable=True),
    )
    op.create_index("ix_uploads_status_expires_at", "uploads", ["status", "expires_at"])
    op.create_table(
        "upload_parts",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column(
            "upload_id", sa.String(128), sa.ForeignKey("uploads.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_upload_parts_upload_id", "upload_parts", ["upload_id"])


def downgrade() -> None:
    op.drop_table("upload_parts")
    op.drop_table("uploads")
