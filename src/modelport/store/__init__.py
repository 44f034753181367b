"""State on a database: stored chat completions, responses, files and batches (SQLite by default,
PostgreSQL for several replicas sharing it). The service uses it; routes never do."""

from __future__ import annotations

from typing import Any

from modelport.store.batches import Batches
from modelport.store.completions import Completions
from modelport.store.database import Database
from modelport.store.files import Files
from modelport.store.pages import Order, Page
from modelport.store.responses import Responses

__all__ = ["Order", "Page", "Store"]


class Store:
    """One database and the tables of each kind of state."""

    def __init__(self, url: str) -> None:
        self.database = Database(url)
        self.completions = Completions(self.database)
        self.responses = Responses(self.database)
        self.files = Files(self.database)
        self.batches = Batches(self.database)

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
