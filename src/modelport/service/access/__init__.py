"""Who may call, within which limits, and what each project used: keys (`keys`), rate limits and allowed
models (`quotas`), usage records (`usage`), and the management of projects and keys (`admin`). Every face
sets the caller's project in the request context; the service admits each model request here and counts
what it used."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import Any

from modelport import context, metrics
from modelport.context import RequestContext
from modelport.errors import AuthenticationError, PermissionDeniedError
from modelport.metrics import Tally
from modelport.service.access.admin import Admin
from modelport.service.access.client_secrets import PREFIX, ClientSecrets
from modelport.service.access.keys import Keys, Principal
from modelport.service.access.quotas import Quotas
from modelport.service.access.tokens import Tokens, looks_like_jwt
from modelport.service.access.usage import Meter
from modelport.settings import Settings
from modelport.store import Store

__all__ = ["Access", "Principal", "acting_as"]


def acting_as(principal: Principal | None, request: RequestContext) -> RequestContext:
    """`request` as made by `principal` (its project, key and limits; the default project's when None),
    with answer headers of its own (the rate limits its admission sets)."""
    if principal is None:
        return replace(request, headers={})
    return replace(
        request, project=principal.project, key_id=principal.key_id, limits=principal.limits, headers={}
    )


class Access:
    """Keys, limits and usage over one store."""

    def __init__(self, store: Store | None, settings: Settings) -> None:
        self.keys = Keys(store, list(settings.api_keys), settings.auth)
        self.quotas = Quotas()
        self.meter = Meter(store, settings.auth.usage_flush_seconds)
        self.admin = Admin(store, self.keys)
        self.secrets = ClientSecrets(store, self.keys)
        self.tokens = Tokens(settings.auth, store) if settings.auth.jwks_url else None

    async def identify(
        self, authorization: str | None, *, admin: bool = False, realtime: bool = False, opened: bool = False
    ) -> Principal | None:
        """The caller an `Authorization` header names; None when this server needs no key (then every
        caller is the default project's). A 401 for a missing or wrong key, a 403 for a member key where
        an admin key is needed (the organization API, which always needs one). A realtime client secret
        is taken where `realtime` (opening a session; `opened`: a session it opened goes on past its
        expiry), checked even on a server that needs no key (it carries the session's configuration)
        and refused everywhere else."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token.startswith(PREFIX):
            if not realtime or admin:
                raise PermissionDeniedError(
                    "A client secret (ek_…) opens Realtime API sessions only (a WebRTC call or a "
                    "WebSocket); every other request needs an API key."
                )
            return await self.secrets.check(token, opened=opened)
        if self.tokens is None and not await self.keys.required() and not admin:
            return None
        if not authorization:
            raise AuthenticationError(
                "You didn't provide an API key. Send it as `Authorization: Bearer <key>`."
            )
        if scheme.lower() != "bearer" or not token:
            raise AuthenticationError("Send the API key as `Authorization: Bearer <key>`.")
        if self.tokens is not None and looks_like_jwt(token):
            principal = await self.tokens.check(token)
        else:
            principal = await self.keys.check(token)
        if admin and principal.role != "admin":
            raise PermissionDeniedError(
                "This needs an admin key (`modelport keys create --admin`); this key is a member's."
            )
        return principal

    async def admit(self, model: str) -> RequestContext:
        """Let a request for `model` in under its project's and key's limits (a 429 or 404 if not); the
        caller as admitted. Background work done for a project without a key (a batch's lines, a vector
        store's ingest) is held to the project's own limits, read here."""
        request = context.current()
        if request.background and request.key_id is None and not request.limits:
            request = replace(request, limits=await self.keys.project_limits(request.project))
            context.enter(request)
        self.quotas.admit(request, model)
        return request

    def settle(self, request: RequestContext, model: str, kind: str, tally: Tally, characters: int) -> None:
        """Count what a finished request used."""
        self.meter.record(request, model, kind, tally, characters)
        self.quotas.spend(request, model, tally.input_tokens + tally.output_tokens)

    async def metered(
        self,
        items: AsyncGenerator[Any, None],
        request: RequestContext,
        model: str,
        kind: str,
        tally: Tally,
    ) -> AsyncGenerator[Any, None]:
        """A stream's items, its usage tallied wherever it is read, and counted when it ends (or its
        client leaves: what was generated was used)."""
        try:
            while True:
                with metrics.Tallied(tally):
                    try:
                        item = await items.__anext__()
                    except StopAsyncIteration:
                        break
                yield item
        finally:
            await items.aclose()
            self.settle(request, model, kind, tally, 0)

    async def close(self) -> None:
        """Write pending usage and last-used dates."""
        await self.meter.close()
        await self.keys.flush()
