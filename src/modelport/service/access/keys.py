"""Who is calling: a bearer key checked against the keys of `--api-key` (the default project's) and the
store's keys (kept as hashes), with a short cache so a check costs microseconds and a revocation is seen
within `key_cache_seconds` on every replica."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from modelport.context import DEFAULT_PROJECT
from modelport.errors import AuthenticationError, StoreUnavailableError
from modelport.service.access.cached_reads import ReadAhead
from modelport.settings import AuthSettings
from modelport.store import Store

Role = Literal["member", "admin"]
_CACHE_CAP = 10_000  # distinct keys remembered at once: bounds what a flood of wrong keys can cost


@dataclass(frozen=True)
class Principal:
    """A checked caller: its project, its key (None for `--api-key` keys and tokens), its role, and the
    limits that apply (the project's, then the key's); for a realtime client secret, the session it opens
    (such a caller may open realtime sessions and nothing else)."""

    project: str
    key_id: str | None = None
    role: Role = "member"
    limits: tuple[dict[str, Any], ...] = ()
    expires_at: int | None = None
    session: dict[str, Any] | None = None


def digest(key: str) -> str:
    """What is stored of a key: keys are 256 random bits, so one SHA-256 makes the store useless to a
    thief without slowing every request the way a password hash would."""
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    """A new secret key, shaped like OpenAI's."""
    return f"sk-mp-{secrets.token_urlsafe(32)}"


def redacted(key: str) -> str:
    """What lists show of a key."""
    return f"{key[:8]}...{key[-4:]}"


@dataclass
class Keys:
    """Checks bearer keys; `required()` says whether a request without one is refused."""

    store: Store | None
    static: list[str]
    settings: AuthSettings
    _used: dict[str, int] = field(default_factory=dict)
    _flushed: float = 0.0
    _flushing: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        def ttl() -> float:  # read at each use: the settings may change after start (tests change them)
            return self.settings.key_cache_seconds

        # What a key stands for, by its hash (None: no key of ours, or revoked).
        self._seen = ReadAhead(self._lookup, ttl, _CACHE_CAP)
        self._any_live = ReadAhead(self._read_any_live, ttl, 1)
        # Each project's own limits (without a key's).
        self._project_limits = ReadAhead(self._read_project_limits, ttl, _CACHE_CAP)

    async def required(self) -> bool:
        """Whether `/v1` needs a key: the settings say always, some were given with `--api-key`, or the
        store holds a live one. While the store cannot be reached, what was last known holds; a server
        that never reached it serves without keys (nothing stored can be reached either) unless the
        settings say always."""
        if self.static or self.settings.required:
            return True
        return await self.stored()

    async def stored(self) -> bool:
        """Whether the store holds a live key (projects have keys of their own), as last known."""
        if self.store is None:
            return False
        return await self._any_live.get("")

    async def _read_any_live(self, _: str) -> bool:
        assert self.store is not None
        try:
            return await self.store.keys.any_live()
        except StoreUnavailableError:
            return self._any_live.known("") or False

    async def check(self, key: str) -> Principal:
        """The caller a key stands for; a 401 if it is none of ours, revoked, expired or its project is
        archived."""
        for known in self.static:
            # Compared with each, in constant time, so timing tells nothing about any of them.
            if hmac.compare_digest(key.encode(), known.encode()):
                return Principal(DEFAULT_PROJECT, limits=await self.project_limits(DEFAULT_PROJECT))
        if self.store is None:
            raise AuthenticationError("Incorrect API key provided.")
        principal = await self._seen.get(digest(key))
        if principal is None or (principal.expires_at is not None and principal.expires_at <= time.time()):
            raise AuthenticationError("Incorrect API key provided, or the key was revoked or expired.")
        if principal.key_id is not None:
            self._used[principal.key_id] = int(time.time())
            now = time.monotonic()
            if now - self._flushed > self.settings.key_cache_seconds and (
                self._flushing is None or self._flushing.done()
            ):
                self._flushed = now  # written beside the request, not in its way
                self._flushing = asyncio.get_running_loop().create_task(self.flush())
        return principal

    async def flush(self) -> None:
        """Write when keys were last used (batched: one write per key per cache period, not per
        request)."""
        if self.store is None or not self._used:
            return
        used, self._used = self._used, {}
        with contextlib.suppress(StoreUnavailableError):  # a last-used date is not worth an error
            await self.store.keys.used(used)

    def forget(self) -> None:
        """Drop what is cached (after a change made here, so it is seen at once on this replica)."""
        self._seen.forget()
        self._any_live.forget()
        self._project_limits.forget()

    async def _lookup(self, hashed: str) -> Principal | None:
        assert self.store is not None
        row = await self.store.keys.by_hash(hashed)
        if row is None or row["revoked_at"] is not None or row["archived_at"] is not None:
            return None
        if not hmac.compare_digest(row["hash"], hashed):
            return None
        return Principal(
            project=row["project"],
            key_id=row["id"],
            role=row["role"],
            limits=(row["project_limits"] or {}, row["limits"] or {}),
            expires_at=row["expires_at"],
        )

    async def project_limits(self, project: str) -> tuple[dict[str, Any], ...]:
        """A project's own limits (work done for it without a key, such as a batch's lines, is held to
        them), read again after `key_cache_seconds`."""
        if self.store is None:
            return ()
        return await self._project_limits.get(project)

    async def _read_project_limits(self, project: str) -> tuple[dict[str, Any], ...]:
        assert self.store is not None
        try:
            row = await self.store.projects.get(project)
        except StoreUnavailableError:
            row = None
        return (row["limits"],) if row and row["limits"] else ()
