"""Realtime client secrets (ephemeral keys), kept as hashes until they expire.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "client_secrets",
        sa.Column("hash", sa.String(64), primary_key=True),
        sa.Column("project", sa.String(64), nullable=False, server_default="proj_default"),
        sa.Column("key_id", sa.String(64), nullable=True),
        sa.Column("session", sa.JSON, nullable=False),
        sa.Column("created", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_client_secrets_expires_at", "client_secrets", ["expires_at"])


def downgrade() -> None:
    op.drop_table("client_secrets")
