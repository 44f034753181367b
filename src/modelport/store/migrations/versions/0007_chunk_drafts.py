"""The chunks of files being ingested, kept as they are embedded (an ingest taken up goes on from them).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "vector_chunk_drafts",
        sa.Column(
            "vector_store_id",
            sa.String(128),
            sa.ForeignKey("vector_stores.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("file_id", sa.String(128), primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("embedding", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("vector_chunk_drafts")
