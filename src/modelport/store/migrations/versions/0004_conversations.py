"""Conversations and their items.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("project", sa.String(64), nullable=False, server_default="proj_default"),
    )
    op.create_index("ix_conversations_project_created_id", "conversations", ["project", "created", "id"])
    op.create_table(
        "conversation_items",
        sa.Column(
            "conversation_id",
            sa.String(128),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.BigInteger, primary_key=True),
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("item", sa.JSON, nullable=False),
    )
    op.create_index(
        "ix_conversation_items_item", "conversation_items", ["conversation_id", "id"], unique=True
    )


def downgrade() -> None:
    op.drop_table("conversation_items")
    op.drop_table("conversations")
