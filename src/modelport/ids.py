"""Ids in OpenAI's style (`chatcmpl-…`, `resp_…`), ordered by time: lists sorted by (created, id) then
follow the order things were made in, even within one second."""

from __future__ import annotations

import secrets
import time


def new_id(prefix: str, separator: str = "-") -> str:
    """`prefix` + microseconds since the epoch (13 hex digits) + 16 random hex digits."""
    return f"{prefix}{separator}{time.time_ns() // 1000:013x}{secrets.token_hex(8)}"
