"""The text columns' types. PostgreSQL's text holds no NUL character (SQLite's does, and JSON holds it
escaped): a client's string with one in it — a metadata value, a vector store's name, an id in a URL, a
document's text — failed the statement, a 500. On PostgreSQL such a character is written as U+FFFD, in the
values stored and in the values a query compares alike (the JSON of an object keeps it as sent)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Dialect, String, Text, TypeDecorator

_NUL, _REPLACEMENT = "\x00", "\ufffd"


class NulFreeString(TypeDecorator[str]):
    """`String`, with no NUL character sent to PostgreSQL."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if isinstance(value, str) and dialect.name == "postgresql" and _NUL in value:
            return value.replace(_NUL, _REPLACEMENT)
        return value


class NulFreeText(NulFreeString):
    """`Text`, with no NUL character sent to PostgreSQL."""

    impl = Text
    cache_ok = True  # (SQLAlchemy reads it from each class itself)
