"""The guard of a server on a loopback address against the web pages its user visits. Such a server serves
this machine only, and with no keys (the default there) whatever reaches it may use its models and read what
it stores. A page elsewhere cannot read its HTTP answers (no CORS unless the operator allows an origin), but:

- it can rebind its own domain to 127.0.0.1 and call the server as itself (DNS rebinding): the browser then
  sends the page's domain as `Host`. A request must be addressed to this machine — `localhost` (or a
  `*.localhost` name), an IP address, this machine's name — or to a name the operator allows
  (`--allowed-host`, `*` for any);
- it can open a WebSocket to it (browsers apply no CORS to WebSockets, and the page reads every message),
  and post forms to it (an upload, a transcription) without reading the answer. A request that comes from a
  page (it has an `Origin`) must come from one of this machine (`localhost`, `*.localhost`, a loopback
  address), from a desktop app's page (`app:`, `file:`, `tauri:`, `vscode-webview:`), or from an origin the
  operator allows (`--cors-origin`).

Any other is a 403 (a WebSocket refused before it opens). On other addresses the operator's keys guard it."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from modelport.errors import PermissionDeniedError
from modelport.server.middleware import reply

# The schemes of desktop apps' own pages (Electron, Tauri, VS Code's webviews), as Ollama allows them.
_APP_SCHEMES = ("app", "file", "tauri", "vscode-webview", "vscode-file")


class HostGuard:
    """Refuse requests addressed to a name that is not this machine's, or sent by a page of another origin
    (see the module)."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str], origins: Iterable[str]) -> None:
        self.app = app
        self.names = {"localhost", socket.gethostname().lower(), *(name.lower() for name in allowed)}
        self.origins = {origin.rstrip("/").lower() for origin in origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope["headers"])
            refused = self._refusal(headers.get(b"host"), headers.get(b"origin"))
            if refused is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})  # before it opens: a 403
                else:
                    await reply(send, refused, scope["path"])
                return
        await self.app(scope, receive, send)

    def _refusal(self, host: bytes | None, origin: bytes | None) -> PermissionDeniedError | None:
        name = _name(host.decode("latin-1")) if host is not None else None
        if name is not None and not self._named(name):
            return PermissionDeniedError(
                f"This server serves this machine only: a request must be addressed to localhost or an IP "
                f"address, not '{name}' (how a web page would reach it by DNS rebinding). To serve that "
                f"name, start it with --allowed-host {name}.",
                code="host_not_allowed",
            )
        page = origin.decode("latin-1").strip() if origin is not None else None
        if page is not None and not self._from_here(page):
            return PermissionDeniedError(
                f"This server serves this machine only: a web page of '{page}' may not call it (a page "
                f"could otherwise use its models). To let one, start it with --cors-origin {page}.",
                code="origin_not_allowed",
            )
        return None

    def _named(self, name: str) -> bool:
        if "*" in self.names or name in self.names or name.endswith(".localhost"):
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True

    def _from_here(self, origin: str) -> bool:
        if "*" in self.origins or origin.rstrip("/").lower() in self.origins:
            return True
        parts = urlsplit(origin.lower())
        if parts.scheme in _APP_SCHEMES:
            return True
        name = (parts.hostname or "").rstrip(".")
        if name == "localhost" or name.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False


def _name(host: str) -> str:
    """The name of a `Host` header: without its port and an IPv6 address's brackets, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0].rstrip(".") if host.count(":") <= 1 else host
