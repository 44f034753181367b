"""The one way the server fetches a URL a client gave: `https` to public addresses only (unless the
operator allows a host, host:port or network with `allow_fetch`, which also allows `http` there), the
resolved address checked and pinned for the connection (a name cannot resolve to a public address for the
check and to a private one for the connection), every redirect checked the same way, a byte cap while
reading, one deadline for the whole fetch, and nothing of the client's (no cookies, no credentials)
sent on."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

import anyio
import httpx

from modelport import machine
from modelport.errors import InvalidRequestError

_REDIRECTS = 5
IP = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Fetched:
    """What a URL gave: its bytes, its media type, and the name its path ends with."""

    content: bytes
    media_type: str
    name: str


@dataclass(frozen=True)
class Pin:
    """A URL's origin as checked: its scheme, host and port, the address it is reached at, the `Host`
    header, and the TLS name (SNI and the certificate's check) when it is https."""

    scheme: str
    host: str
    port: int
    address: str
    header: str

    @property
    def extensions(self) -> dict[str, str]:
        """The transport extensions that keep the host's name for TLS while connecting to the address."""
        return {"sni_hostname": self.host} if self.scheme == "https" else {}


class Fetcher:
    """Fetches client-given URLs under the operator's rules."""

    def __init__(self, allow: list[str], enabled: bool, max_bytes: int, seconds: float) -> None:
        self.enabled = enabled
        self.max_bytes = max_bytes
        self.seconds = seconds
        self._hosts: set[str] = set()
        self._networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in allow:
            try:
                self._networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self._hosts.add(entry.lower())

    async def get(self, url: str, param: str, max_bytes: int | None = None) -> Fetched:
        """The bytes at `url`, or a 400 naming `param` that says why not."""
        if not self.enabled:
            raise _refused(param, "this server fetches no URLs (--no-remote-fetch)")
        cap = min(self.max_bytes, max_bytes) if max_bytes is not None else self.max_bytes
        try:
            with anyio.fail_after(self.seconds):
                return await self._follow(url, param, cap)
        except TimeoutError:
            raise _refused(param, f"fetching {url} took more than {self.seconds:g} s") from None
        except httpx.HTTPError as error:
            raise _refused(param, f"fetching {url} failed: {type(error).__name__}") from None

    async def _follow(self, url: str, param: str, cap: int) -> Fetched:
        async with httpx.AsyncClient(
            follow_redirects=False, trust_env=False, timeout=self.seconds, verify=machine.trust_store()
        ) as client:
            for _ in range(_REDIRECTS + 1):
                target = _url(url, param)
                request = await self._pinned(client, target, param)
                response = await client.send(request, stream=True)
                try:
                    if response.is_redirect:
                        location = response.headers.get("location")
                        if not location:
                            raise _refused(param, f"{url} redirects nowhere")
                        try:
                            url = str(target.join(location))
                        except (httpx.InvalidURL, ValueError, UnicodeError):
                            raise _refused(param, f"{url} redirects to {location!r}, not a URL") from None
                        continue
                    if response.status_code != 200:
                        raise _refused(param, f"{url} answered {response.status_code}")
                    declared = response.headers.get("content-length")
                    if declared is not None and declared.isdigit() and int(declared) > cap:
                        raise _refused(param, f"{url} is over the limit of {cap} bytes")
                    body = bytearray()
                    async for piece in response.aiter_bytes():
                        body += piece
                        if len(body) > cap:
                            raise _refused(param, f"{url} is over the limit of {cap} bytes")
                    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
                    return Fetched(bytes(body), media, target.path.rsplit("/", 1)[-1])
                finally:
                    await response.aclose()
        raise _refused(param, f"{url} redirects more than {_REDIRECTS} times")

    async def pin(self, url: str, param: str) -> Pin:
        """Where `url` may be reached: its host resolved and checked under the operator's rules (a 400
        naming `param` if it may not be)."""
        if not self.enabled:
            raise _refused(param, "this server fetches no URLs (--no-remote-fetch)")
        target = _url(url, param)
        host = target.host
        port = target.port or (443 if target.scheme == "https" else 80)
        if target.scheme not in ("http", "https"):
            raise _refused(param, f"only https URLs are fetched, not {target.scheme}:")
        if target.userinfo:
            raise _refused(param, "URLs with credentials are not fetched")
        named = self._named(host, port)
        try:
            found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            raise _refused(param, f"the host {host} does not resolve") from None
        addresses: list[IP] = [ipaddress.ip_address(info[4][0]) for info in found]
        for address in addresses:
            if not named and not self._in_allowed_network(address) and not _public(address):
                raise _refused(param, f"{host} is {address}, not a public address")
        if target.scheme == "http" and not (named or all(self._in_allowed_network(a) for a in addresses)):
            raise _refused(param, "only https URLs are fetched (http only from hosts the operator allows)")
        header = host if target.port is None else f"{host}:{target.port}"
        return Pin(target.scheme, host, port, str(addresses[0]), header)

    async def _pinned(self, client: httpx.AsyncClient, target: httpx.URL, param: str) -> httpx.Request:
        """A request to the address `target`'s host resolves to, checked, with the host's name kept for
        the `Host` header and TLS (SNI and the certificate's check)."""
        pin = await self.pin(str(target), param)
        return client.build_request(
            "GET",
            target.copy_with(host=pin.address),
            headers={"Host": pin.header, "Accept": "*/*"},
            extensions=pin.extensions,
        )

    def _named(self, host: str, port: int) -> bool:
        return host.lower() in self._hosts or f"{host.lower()}:{port}" in self._hosts

    def _in_allowed_network(self, address: IP) -> bool:
        return any(address in network for network in self._networks)


# IPv6 forms that carry an IPv4 address in their last 32 bits, which a router or a NAT64 gateway may deliver
# to that IPv4 address: IPv4-compatible (::/96, deprecated), IPv4-translated (::ffff:0:0:0/96) and the
# well-known NAT64 prefix (64:ff9b::/96). The local-use NAT64 prefix (64:ff9b:1::/48) places the address
# by the operator's prefix length: never public.
_EMBEDDING_IPV4 = (
    ipaddress.IPv6Network("::/96"),
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
    ipaddress.IPv6Network("64:ff9b::/96"),
)
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")


def _public(address: IP) -> bool:
    """A globally routable unicast address: not loopback, private, link-local (cloud metadata),
    shared (CGNAT), multicast, reserved, unspecified, nor an IPv4 one of those behind IPv6 (mapped,
    compatible, translated, NAT64, 6to4, Teredo)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in _LOCAL_NAT64:
            return False
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and any(address in network for network in _EMBEDDING_IPV4):
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return _public(embedded)
        if address.teredo is not None:
            return all(_public(inner) for inner in address.teredo)
    return address.is_global and not address.is_multicast


def _url(url: str, param: str) -> httpx.URL:
    """`url` parsed (a client's, or a redirect's `Location`), or a 400 naming `param`: an unclosed IPv6
    bracket, an octal host, a bad port are the client's mistakes."""
    try:
        return httpx.URL(url)
    except (httpx.InvalidURL, ValueError, UnicodeError):
        raise _refused(param, f"{url!r} is not a URL") from None


def _refused(param: str, why: str) -> InvalidRequestError:
    return InvalidRequestError(f"The URL in {param} was not fetched: {why}.", param=param, code="invalid_url")
