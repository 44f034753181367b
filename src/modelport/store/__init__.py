"""State on a database: stored chat completions, responses, conversations, files, batches and vector stores,
each owned
by a project; projects, their keys and their usage (SQLite by default, PostgreSQL for several replicas
sharing it). The service uses it; routes never do."""

from __future__ import annotations

from typing import Any

from modelport.store.batch_rows import BatchRows
from modelport.store.chunk_rows import ChunkRows
from modelport.store.completion_rows import CompletionRows
from modelport.store.conversation_rows import ConversationRows
from modelport.store.cursor_pages import Order, Page
from modelport.store.database import Database
from modelport.store.file_rows import FileRows
from modelport.store.project_rows import KeyRows, ProjectRows
from modelport.store.response_rows import ResponseRows
from modelport.store.secret_rows import SecretRows
from modelport.store.upload_rows import UploadRows
from modelport.store.usage_rows import UsageRows
from modelport.store.vector_rows import VectorRows

__all__ = ["Order", "Page", "Store"]


class Store:
    """One database and the tables of each kind of state."""

    def __init__(self, url: str) -> None:
        self.database = Database(url)
        self.completions = CompletionRows(self.database)
        self.responses = ResponseRows(self.database)
        self.files = FileRows(self.database)
        self.uploads = UploadRows(self.database)
        self.batches = BatchRows(self.database)
        self.projects = ProjectRows(self.database)
        self.keys = KeyRows(self.database)
        self.secrets = SecretRows(self.database)
        self.usage = UsageRows(self.database)
        self.conversations = ConversationRows(self.database)
        self.vectors = VectorRows(self.database)
        self.chunks = ChunkRows(self.database)

    def state(self) -> dict[str, Any]:
        """Reachable or not, for `/health`."""
        return self.database.state()

    async def open(self) -> None:
        """Connect and bring the schema up to date (start-up does this; otherwise the first use does)."""
        await self.database.open()

    async def ping(self) -> None:
        """Reach the database (a 503 if it cannot be reached)."""
        await self.database.ping()

    async def close(self) -> None:
        """Release the connections."""
        await self.database.close()
