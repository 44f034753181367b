"""Realtime client secrets (ephemeral keys): an app's backend mints one with its API key and hands it to a
browser or phone, which opens a realtime session with it (a WebRTC call or a WebSocket) without ever
holding the API key. A secret is good only for realtime, only until it expires (a session opened before
then goes on), only for the minting key's project and within its limits, and opens sessions with the
configuration it was minted with. Kept as hashes, like API keys; without a store, in this process."""

from __future__ import annotations

import secrets
import time
from typing import Any

from modelport.context import RequestContext
from modelport.errors import AuthenticationError
from modelport.service.access.keys import Keys, Principal, digest
from modelport.store import Store

_HELD_CAP = 10_000  # secrets held in memory without a store: bounds what a flood of mints can cost
PREFIX = "ek_"


class ClientSecrets:
    """Mints and checks client secrets."""

    def __init__(self, store: Store | None, keys: Keys) -> None:
        self.store, self.keys = store, keys
        self._held: dict[str, dict[str, Any]] = {}  # by hash, when there is no store

    async def mint(self, request: RequestContext, session: dict[str, Any], seconds: int) -> tuple[str, int]:
        """A new secret for `request`'s project and key, opening sessions configured as `session`: its
        value and when it expires (unix seconds)."""
        value = f"{PREFIX}{secrets.token_urlsafe(32)}"
        now = int(time.time())
        hashed, expires_at = digest(value), now + seconds
        row: dict[str, Any] = {
            "hash": hashed,
            "project": request.project,
            "key_id": request.key_id,
            "session": session,
            "created": now,
            "expires_at": expires_at,
        }
        if self.store is not None:
            await self.store.secrets.create(row)
        else:
            self._held = {h: r for h, r in self._held.items() if r["expires_at"] > now}
            if len(self._held) >= _HELD_CAP:
                self._held.pop(next(iter(self._held)))
            self._held[hashed] = row
        return value, expires_at

    async def check(self, value: str, *, opened: bool = False) -> Principal:
        """The caller a secret stands for, with the session it carries; a 401 if it is none of ours, has
        expired (unless `opened`: a session opened with it outlives it), or its key was revoked since."""
        hashed = digest(value)
        row = await self.store.secrets.by_hash(hashed) if self.store is not None else self._held.get(hashed)
        if row is None:
            raise AuthenticationError("Incorrect client secret provided.")
        if not opened and row["expires_at"] <= time.time():
            raise AuthenticationError(
                "The client secret has expired: ask the app's backend for a new one "
                "(POST /v1/realtime/client_secrets)."
            )
        limits = await self.keys.project_limits(row["project"])
        if row["key_id"] is not None:
            assert self.store is not None  # stored keys only mint with a store
            key = await self.store.keys.get(row["key_id"])
            if (
                key is None
                or key["revoked_at"] is not None
                or (key["expires_at"] is not None and key["expires_at"] <= time.time())
            ):
                raise AuthenticationError("The key that minted this client secret was revoked or expired.")
            limits = (*limits, key["limits"] or {})
        return Principal(row["project"], key_id=row["key_id"], limits=limits, session=row["session"])
