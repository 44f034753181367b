"""The column type of a chunk's embedding: pgvector's `vector` on PostgreSQL (searched in the database with
its cosine distance), little-endian float32 bytes on SQLite (searched in memory: the Python that runs
modelport may be built without SQLite extension loading, so sqlite-vec cannot be counted on)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pgvector.sqlalchemy import VECTOR
from sqlalchemy import Dialect, LargeBinary, TypeDecorator
from sqlalchemy.types import TypeEngine


class Embedding(TypeDecorator[np.ndarray]):
    """A float32 vector of any length, as a numpy array on both databases."""

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(VECTOR())
        return dialect.type_descriptor(LargeBinary())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        vector = np.asarray(value, dtype="<f4")
        return vector if dialect.name == "postgresql" else vector.tobytes()

    def process_result_value(self, value: Any, dialect: Dialect) -> np.ndarray | None:
        if value is None:
            return None
        if dialect.name == "postgresql":
            return np.asarray(value, dtype=np.float32)
        return np.frombuffer(value, dtype="<f4")
