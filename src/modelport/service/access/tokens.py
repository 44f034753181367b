"""Identity from the site's own provider (SSO): a JWT bearer token, its signature checked against a key
of the provider's JWKS, its issuer, audience and expiry checked, its project named by a claim. The JWKS
is fetched with httpx and kept; a token signed by a key it does not hold makes it fetched again (at most
every `_REFETCH` seconds, so unknown key ids cannot flood the provider)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import httpx

from modelport import machine
from modelport.errors import AuthenticationError
from modelport.service.access.keys import Principal
from modelport.settings import AuthSettings
from modelport.store import Store

if TYPE_CHECKING:
    import jwt  # PyJWT and `cryptography` under it: imported by the first token checked (SSO's alone)

_REFETCH = 30.0
_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]


def looks_like_jwt(token: str) -> bool:
    """Three base64url parts: a JWT, not one of our keys."""
    return token.count(".") == 2 and not token.startswith("sk-")


class Tokens:
    """Checks JWTs against the configured JWKS."""

    def __init__(self, settings: AuthSettings, store: Store | None) -> None:
        assert settings.jwks_url is not None
        self.url = settings.jwks_url
        self.settings = settings
        self.store = store
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched = 0.0
        self._fetching = asyncio.Lock()
        self._projects: dict[str, tuple[Principal | None, float]] = {}

    async def check(self, token: str) -> Principal:
        """The caller a token stands for; a 401 naming what is wrong with it."""
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as error:
            raise AuthenticationError(f"The bearer token is not a valid JWT: {error}.") from None
        key = await self._key(str(header.get("kid") or ""))
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[key.algorithm_name] if key.algorithm_name in _ALGORITHMS else _ALGORITHMS,
                audience=self.settings.jwt_audience,
                issuer=self.settings.jwt_issuer,
                options={"require": ["exp"], "verify_aud": self.settings.jwt_audience is not None},
            )
        except jwt.PyJWTError as error:
            raise AuthenticationError(f"The bearer token was refused: {error}.") from None
        named = claims.get(self.settings.jwt_project_claim)
        if not isinstance(named, str) or not named:
            raise AuthenticationError(
                f"The token has no `{self.settings.jwt_project_claim}` claim naming a project."
            )
        return await self._project(named)

    async def _key(self, kid: str) -> jwt.PyJWK:
        if kid not in self._keys and time.monotonic() - self._fetched > _REFETCH:
            async with self._fetching:
                if kid not in self._keys and time.monotonic() - self._fetched > _REFETCH:
                    await self._fetch()
        found = self._keys.get(kid) or (next(iter(self._keys.values())) if not kid and self._keys else None)
        if found is None:
            raise AuthenticationError("The token is signed by a key the identity provider does not list.")
        return found

    async def _fetch(self) -> None:
        import jwt

        self._fetched = time.monotonic()
        try:
            # The machine's trust store, as every connection the server opens: an identity provider inside
            # a company is signed by its own authority, installed there (httpx's default is certifi's alone).
            trusted = machine.trust_store()
            async with httpx.AsyncClient(timeout=10, follow_redirects=False, verify=trusted) as client:
                answer = await client.get(self.url)
                answer.raise_for_status()
                listed = jwt.PyJWKSet.from_dict(answer.json())
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as error:
            raise AuthenticationError(f"The identity provider's keys could not be read: {error}") from None
        self._keys = {str(key.key_id or ""): key for key in listed.keys}

    async def _project(self, named: str) -> Principal:
        seen = self._projects.get(named)
        if seen is None or time.monotonic() - seen[1] > self.settings.key_cache_seconds:
            row = await self.store.projects.named(named) if self.store is not None else None
            principal = None
            if row is not None and row["archived_at"] is None:
                principal = Principal(project=row["id"], limits=(row["limits"] or {},))
            seen = self._projects[named] = (principal, time.monotonic())
        if seen[0] is None:
            raise AuthenticationError(f"The token's project '{named}' does not exist or is archived.")
        return seen[0]
