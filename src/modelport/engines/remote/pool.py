"""The replicas of a remote model: which one takes a request, which are healthy, and failing over.

A request goes to the replica with the fewest requests in flight (ties broken at random, so equal
replicas share the load evenly), or sticks to one replica per session or conversation prefix (rendezvous
hashing: a replica that leaves moves only its own keys). A replica that fails — no connection, a 5xx, a
429, no first byte in time — is out for its cool-down (or the upstream's `Retry-After`) and is probed back
in; a request that failed before anything reached the client is tried on another replica.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import random
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import anyio
import httpx
from httpx_aiohttp import AiohttpTransport

from modelport import context, metrics
from modelport.engines.remote.options import RemoteOptions
from modelport.errors import (
    ModelportError,
    RelayedError,
    UpstreamError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)

log = logging.getLogger("modelport.upstreams")
T = TypeVar("T")
RETRYABLE = frozenset({429, 502, 503, 504})
_TICK = 0.25  # seconds between looks at which replicas are due a probe
_IDLE_SECONDS = 3.0  # how long an idle connection to an upstream is kept (see `_session`)


class Failure(Exception):
    """A request that failed before its first byte reached the client: another replica may take it."""

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        timeout: bool = False,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after
        self.timeout = timeout
        self.body = body


@dataclass(eq=False)
class Replica:
    """One upstream base URL and what is known of it."""

    url: str
    label: str  # the URL without credentials: what logs, errors, metrics and /health show
    in_flight: int = 0
    up: bool = True
    down_until: float = 0.0
    last_probe: float = field(default=-math.inf)
    last_error: str | None = None
    limited: bool = False  # out because it answered 429

    def state(self) -> dict[str, Any]:
        """What `/health` says of this replica."""
        report: dict[str, Any] = {"url": self.label, "state": "up" if self.up else "down"}
        report["in_flight"] = self.in_flight
        if not self.up:
            report["retry_in"] = round(max(0.0, self.down_until - time.monotonic()), 1)
        if self.last_error:
            report["last_error"] = self.last_error
        return report


def label_of(url: str) -> str:
    """`url` without a user name or password in it."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def describe(error: BaseException) -> str:
    """A transport error in a few words, by what happened at the socket (the aiohttp error under httpx's,
    which the transport maps coarsely: a refused connection arrives as a `ConnectTimeout`)."""
    cause = error.__cause__ or error
    for kinds, what in _KINDS:
        if isinstance(cause, kinds):
            text = str(cause).strip()
            return f"{what}: {text}" if text else what
    return f"{type(cause).__name__}: {cause}"


def timed_out(error: BaseException) -> bool:
    """Whether a transport error was a timeout rather than a refusal or a broken connection."""
    return isinstance(error.__cause__ or error, _TIMEOUTS)


_TIMEOUTS = (TimeoutError, aiohttp.ServerTimeoutError, httpx.TimeoutException)
_KINDS: list[tuple[type[BaseException] | tuple[type[BaseException], ...], str]] = [
    (_TIMEOUTS, "timed out"),
    ((aiohttp.ClientConnectorError, httpx.ConnectError), "connection failed"),
    (
        (
            aiohttp.ServerDisconnectedError,
            aiohttp.ClientPayloadError,
            aiohttp.ClientOSError,
            httpx.NetworkError,
        ),
        "connection broken",
    ),
    (httpx.RemoteProtocolError, "connection broken"),
]


class ReplicaPool:
    """The replicas of one `engine = "remote"` entry, shared by every model it serves."""

    def __init__(self, options: RemoteOptions, timeout: float, name: str) -> None:
        self.options = options
        self.name = name
        self.replicas = [Replica(url, label_of(url)) for url in options.upstreams]
        self.first_byte_timeout = options.first_byte_timeout or timeout
        self.read_timeout = timeout
        self._key = options.api_key()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._probes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
            weakref.WeakKeyDictionary()
        )

    def client(self) -> httpx.AsyncClient:
        """The HTTP client of the running event loop (connections cannot cross loops)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = httpx.AsyncClient(
                timeout=httpx.Timeout(
                    connect=self.options.connect_timeout,
                    read=self.read_timeout,
                    write=self.read_timeout,
                    pool=None,
                ),
                # aiohttp's C parser reads an upstream's stream at about half the CPU of httpx's own.
                transport=AiohttpTransport(client=_session),
            )
        return client

    def headers(self) -> dict[str, str]:
        """The upstream's key and the request's id, on every request sent upstream."""
        headers = {}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        request_id = context.current().request_id
        if request_id:
            headers["X-Request-Id"] = request_id
        return headers

    async def check(self) -> None:
        """Probe every replica now."""
        await asyncio.gather(*(self._probe(r) for r in self.replicas))

    def start(self) -> None:
        """Probe the replicas from now on, in the running event loop."""
        loop = asyncio.get_running_loop()
        task = self._probes.get(loop)
        if task is None or task.done():
            self._probes[loop] = loop.create_task(self._probe_forever(), name=f"probe {self.name}")

    async def close(self) -> None:
        """Stop probing and close the connections of the running event loop."""
        loop = asyncio.get_running_loop()
        task = self._probes.pop(loop, None)
        if task is not None:
            task.cancel()
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    def choose(self, key: str | None, tried: list[Replica]) -> Replica | None:
        """The replica for the next attempt, or None when no healthy one is left untried."""
        candidates = [r for r in self.replicas if r.up and r not in tried]
        if not candidates:
            return None
        if key is not None and self.options.routing != "least":
            return max(candidates, key=lambda r: _weight(key, r.url))
        fewest = min(r.in_flight for r in candidates)
        return random.choice([r for r in candidates if r.in_flight == fewest])

    async def attempt(
        self, start: Callable[[Replica, httpx.AsyncClient], Awaitable[T]], key: str | None, model: str
    ) -> tuple[Replica, T]:
        """Run `start` (a request up to its first byte) on replicas in turn until one succeeds.

        The replica returned counts the request as in flight until `release` is called.
        """
        self.start()
        client = self.client()
        tried: list[Replica] = []
        failures: list[tuple[Replica, Failure]] = []
        while len(tried) < self.options.attempts:
            replica = self.choose(key, tried)
            if replica is None:
                break
            tried.append(replica)
            replica.in_flight += 1
            began = time.perf_counter()
            try:
                with anyio.fail_after(self.first_byte_timeout):
                    result = await start(replica, client)
            except Exception as error:
                replica.in_flight -= 1
                failure = self._failure(error)
                if failure is None:
                    metrics.UPSTREAM_REQUESTS.labels(replica.label, _outcome(error)).inc()
                    if isinstance(error, UpstreamError):  # a 5xx or a garbled answer: not retried, but out
                        self.mark_down(replica, error.message)
                    raise
                metrics.UPSTREAM_REQUESTS.labels(replica.label, str(failure.status or "error")).inc()
                self.mark_down(replica, failure.reason, failure.retry_after, limited=failure.status == 429)
                failures.append((replica, failure))
                continue
            except BaseException:
                replica.in_flight -= 1
                raise
            metrics.UPSTREAM_REQUESTS.labels(replica.label, "200").inc()
            metrics.UPSTREAM_FIRST_BYTE.labels(replica.label).observe(time.perf_counter() - began)
            return replica, result
        raise self._exhausted(model, failures)

    @staticmethod
    def release(replica: Replica) -> None:
        """The request that `attempt` started on `replica` is over."""
        replica.in_flight -= 1

    def mark_down(
        self, replica: Replica, reason: str, seconds: float | None = None, *, limited: bool = False
    ) -> None:
        """Take `replica` out for its cool-down; it is probed back in afterwards."""
        seconds = self.options.cooldown if seconds is None else max(seconds, 0.0)
        if replica.up:
            log.warning("upstream %s is out for %.0f s: %s", replica.label, seconds, reason)
        replica.up = False
        replica.down_until = max(replica.down_until, time.monotonic() + seconds)
        replica.last_error = reason
        replica.limited = limited
        metrics.UPSTREAM_ERRORS.labels(replica.label).inc()

    def _failure(self, error: Exception) -> Failure | None:
        if isinstance(error, Failure):
            return error
        if isinstance(error, TimeoutError):
            return Failure(f"no first byte within {self.first_byte_timeout:g} s", timeout=True)
        if isinstance(error, httpx.TransportError):
            return Failure(describe(error), timeout=timed_out(error))
        return None

    def _exhausted(self, model: str, failures: list[tuple[Replica, Failure]]) -> ModelportError:
        wait = self.retry_after()
        tried = [(r.label, f.reason) for r, f in failures]
        if not failures:
            tried = [(r.label, r.last_error or "down") for r in self.replicas]
        reasons = "; ".join(f"{label}: {reason}" for label, reason in tried)
        if failures and failures[-1][1].timeout:
            return UpstreamTimeoutError(
                f"No upstream of the model `{model}` began to answer in time ({reasons}).", param="model"
            )
        if all(r.limited for r in self.replicas if not r.up) and not any(r.up for r in self.replicas):
            # Every replica is rate-limiting: the client is told so, with the upstream's own words if any.
            limited = [f.body for _, f in failures if f.body]
            body = (
                limited[-1]
                if limited
                else {
                    "error": {
                        "message": f"Every upstream of the model `{model}` is rate-limiting ({reasons}).",
                        "type": "rate_limit_error",
                        "param": None,
                        "code": "rate_limit_exceeded",
                    }
                }
            )
            return RelayedError(429, body, retry_after=wait)
        if not failures:
            return UpstreamUnavailableError(
                f"No upstream of the model `{model}` is available ({reasons}). Retry after {wait} s.",
                retry_after=wait,
            )
        return UpstreamUnavailableError(
            f"Every upstream of the model `{model}` that was tried failed ({reasons}). Retry after {wait} s.",
            retry_after=wait,
        )

    def retry_after(self) -> int:
        """Whole seconds until the first replica that is out may be back (at least one)."""
        now = time.monotonic()
        waits = [r.down_until - now for r in self.replicas if not r.up]
        return max(1, math.ceil(min(waits))) if waits else 1

    def health_url(self, replica: Replica) -> str:
        """Where `replica` is probed: `{base}/models`, or a path on the upstream's origin."""
        if self.options.health == "models":
            return f"{replica.url}/models"
        parts = urlsplit(replica.url)
        return urlunsplit((parts.scheme, parts.netloc, self.options.health, "", ""))

    async def _probe_forever(self) -> None:
        while True:
            now = time.monotonic()
            due = [
                r
                for r in self.replicas
                if (r.up and now - r.last_probe >= self.options.health_interval)
                or (not r.up and now >= r.down_until)
            ]
            if due:
                await asyncio.gather(*(self._probe(r) for r in due))
            await asyncio.sleep(_TICK)

    async def _probe(self, replica: Replica) -> None:
        replica.last_probe = time.monotonic()
        try:
            response = await self.client().get(
                self.health_url(replica),
                headers=self.headers(),
                timeout=httpx.Timeout(10.0, connect=self.options.connect_timeout),
            )
            reason = None if response.status_code == 200 else f"health check answered {response.status_code}"
        except httpx.HTTPError as error:
            reason = f"health check: {describe(error)}"
        if reason is None:
            if not replica.up:
                log.info("upstream %s is back", replica.label)
            replica.up, replica.last_error = True, None
        else:
            self.mark_down(replica, reason)

    async def get_json(self, path: str, model: str) -> Any:
        """A GET on any healthy replica, its JSON body (discovery's `/models`)."""

        async def start(replica: Replica, client: httpx.AsyncClient) -> Any:
            response = await client.get(f"{replica.url}{path}", headers=self.headers())
            await check_status(response, replica)
            try:
                return response.json()
            except ValueError:
                raise UpstreamError(
                    f"The upstream {replica.label}{path} answered with a body that is not JSON."
                ) from None

        replica, body = await self.attempt(start, None, model)
        self.release(replica)
        return body


async def check_status(response: httpx.Response, replica: Replica) -> None:
    """Go on with a 2xx; otherwise raise what its status means: another replica may take a 429, 502, 503
    or 504 (`Failure`), an upstream's 4xx is the request's fault and goes back as it came (`RelayedError`),
    any other 5xx is the upstream's (`UpstreamError`)."""
    if response.status_code < 300:
        return
    content = await response.aread()
    await response.aclose()
    try:
        body = response.json()
    except ValueError:
        body = None
    text = content.decode("utf-8", "replace").strip()[:300]
    shaped = isinstance(body, dict) and isinstance(body.get("error"), dict)
    message = str(body["error"].get("message")) if shaped and body else text
    status = response.status_code
    if status in RETRYABLE:
        raise Failure(
            f"answered {status}: {message}" if message else f"answered {status}",
            status=status,
            retry_after=_retry_after(response),
            body=body if shaped else None,
        )
    if 400 <= status < 500:
        if shaped and body:
            raise RelayedError(status, body, retry_after=None)
        raise RelayedError(
            status,
            {
                "error": {
                    "message": f"The upstream {replica.label} answered {status}: {text}",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "upstream_error",
                }
            },
        )
    raise UpstreamError(f"The upstream {replica.label} answered {status}: {message}")


def _retry_after(response: httpx.Response) -> float | None:
    """The upstream's wait in seconds: `retry-after-ms` (OpenAI's, modelport's), else `Retry-After`."""
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            wait = float(response.headers[header]) / scale
        except (KeyError, ValueError):
            continue
        if wait >= 0:  # not NaN
            return min(wait, 3600.0)
    return None


def _session() -> aiohttp.ClientSession:
    # No cap on connections: an upstream's own limit says how much it takes (aiohttp's default cap of 100
    # would queue the 101st stream unseen). An idle connection is dropped after 3 s, before the 5 s at
    # which uvicorn (vLLM, modelport), Node and llama-server close theirs: a request sent on a connection
    # at the moment its server closes it is reset without an answer, and a POST cannot be sent again.
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=_IDLE_SECONDS))


def _weight(key: str, url: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{key}\0{url}".encode(), digest_size=8).digest(), "big")


def _outcome(error: Exception) -> str:
    return str(error.status) if isinstance(error, ModelportError) else type(error).__name__
