"""Stored chat completions and responses.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chat_completions",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
        sa.Column("completion", sa.JSON, nullable=False),
    )
    op.create_index("ix_chat_completions_created_id", "chat_completions", ["created", "id"])
    op.create_index("ix_chat_completions_model_created_id", "chat_completions", ["model", "created", "id"])
    op.create_table(
        "chat_completion_metadata",
        sa.Column(
            "completion_id",
            sa.String(128),
            sa.ForeignKey("chat_completions.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(512), nullable=False),
    )
    op.create_index(
        "ix_chat_completion_metadata_key_value", "chat_completion_metadata", ["key", "value", "completion_id"]
    )
    op.create_table(
        "responses",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("previous_response_id", sa.String(128), nullable=True),
        sa.Column("background", sa.Boolean, nullable=False),
        sa.Column("heartbeat", sa.BigInteger, nullable=True),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
        sa.Column("input_items", sa.JSON, nullable=False),
        sa.Column("response", sa.JSON, nullable=False),
    )
    op.create_index("ix_responses_previous_response_id", "responses", ["previous_response_id"])
    op.create_index("ix_responses_created_id", "responses", ["created", "id"])
    op.create_table(
        "response_events",
        sa.Column(
            "response_id", sa.String(128), sa.ForeignKey("responses.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("sequence_number", sa.Integer, primary_key=True),
        sa.Column("event", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("response_events")
    op.drop_table("responses")
    op.drop_table("chat_completion_metadata")
    op.drop_table("chat_completions")
