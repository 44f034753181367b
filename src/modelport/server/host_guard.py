"""The guard against DNS rebinding. A server on a loopback address serves this machine only, and with no
keys (the default there) anything that reaches it may use its models and read what it stores. A web page
cannot call it across origins (no CORS unless the operator allows an origin), but it can rebind its own
domain to 127.0.0.1 and call it as itself: the browser then sends the page's domain as `Host`. So on a
loopback address a request must be addressed to this machine — `localhost` (or a `*.localhost` name), an
IP address, this machine's name — or to a name the operator allows (`--allowed-host`, `*` for any); any
other is a 403 (a WebSocket is refused before it opens). On other addresses the operator's keys guard it."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from modelport.errors import PermissionDeniedError
from modelport.server.middleware import reply


class HostGuard:
    """Refuse requests addressed to a name that is not this machine's (see the module)."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        self.names = {"localhost", socket.gethostname().lower(), *(name.lower() for name in allowed)}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            given = dict(scope["headers"]).get(b"host")
            name = _name(given.decode("latin-1")) if given is not None else None
            if name is not None and not self._allowed(name):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})  # before it opens: a 403
                    return
                refused = PermissionDeniedError(
                    f"This server serves this machine only: a request must be addressed to localhost or an "
                    f"IP address, not '{name}' (how a web page would reach it by DNS rebinding). To serve "
                    f"that name, start it with --allowed-host {name}.",
                    code="host_not_allowed",
                )
                await reply(send, refused, scope["path"])
                return
        await self.app(scope, receive, send)

    def _allowed(self, name: str) -> bool:
        if name in self.names or name.endswith(".localhost"):
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True


def _name(host: str) -> str:
    """The name of a `Host` header: without its port and an IPv6 address's brackets, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0].rstrip(".") if host.count(":") <= 1 else host
