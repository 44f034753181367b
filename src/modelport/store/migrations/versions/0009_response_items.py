"""Response items by id: which stored response holds an item, for `item_reference` input items; the
responses already stored are indexed as they are.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "response_items",
        sa.Column("item_id", sa.String(128), primary_key=True),
        sa.Column(
            "response_id", sa.String(128), sa.ForeignKey("responses.id", ondelete="CASCADE"), primary_key=True
        ),
    )
    op.create_index("ix_response_items_response_id", "response_items", ["response_id"])
    rows = op.get_bind().execute(sa.text("SELECT id, input_items, response FROM responses"))
    indexed = [
        {"item_id": item_id, "response_id": response_id}
        for response_id, given, response in rows
        for item_id in _ids([*_json(given), *(_json(response).get("output") or [])])
    ]
    if indexed:
        op.bulk_insert(table, indexed)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _ids(items: list[Any]) -> set[str]:
    found = (item.get("id") for item in items if isinstance(item, dict))
    return {item_id for item_id in found if isinstance(item_id, str) and 0 < len(item_id) <= 128}


def downgrade() -> None:
    op.drop_table("response_items")
