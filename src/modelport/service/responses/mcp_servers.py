"""Remote MCP servers, as the `mcp` tools of a Responses turn reach them: over streamable HTTP (or the
older SSE transport, tried when streamable HTTP fails to start a session, first when the URL ends in
`/sse`), always to the address the one outbound guard checked and pinned, each operation (connecting,
listing, calling) under one deadline, what a tool returns capped in size. Failures are `McpError`s,
which the turn shows as error items, never as a failed request."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx2
from openai.types.responses import McpToolCallError
from openai.types.responses.mcp_tool_call_error import HTTPError, McpProtocolError, McpToolExecutionError

from modelport import machine
from modelport.protocol.validation import json_value
from modelport.service.fetching import Pin

if TYPE_CHECKING:
    from mcp import ClientSession

T = TypeVar("T")


class McpError(Exception):
    """An MCP server that could not be reached, or that refused or failed an operation; `detail` is the
    error as an `mcp_call` item shows it (a tool's own error, an MCP protocol error, or an HTTP one)."""

    def __init__(self, message: str, detail: McpToolCallError | None = None) -> None:
        super().__init__(message)
        self.detail = detail or HTTPError(type="http_error", code=502, message=message)


@dataclass(frozen=True)
class McpServer:
    """One `mcp` tool's server: its label, URL, the headers the request gave for it, where it is reached,
    and the bounds on each operation."""

    label: str
    url: str
    headers: dict[str, str]
    pin: Pin
    seconds: float
    max_chars: int

    async def tools(self) -> list[dict[str, Any]]:
        """The tools it offers: name, description, input schema and annotations of each."""

        async def listed(session: ClientSession) -> list[dict[str, Any]]:
            found = await session.list_tools()
            return [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                    "annotations": tool.annotations.model_dump(exclude_none=True)
                    if tool.annotations
                    else None,
                }
                for tool in found.tools
            ]

        return await self._session(listed)

    async def call(self, name: str, arguments: str) -> str:
        """What one of its tools returns for `arguments` (JSON text), as text; an `McpError` when the call
        fails or the tool reports an error."""
        try:
            parsed = json_value(arguments or "{}")
        except ValueError:
            raise McpError(f"the arguments are not JSON: {arguments[:200]!r}") from None
        if not isinstance(parsed, dict):
            raise McpError("the arguments must be a JSON object")

        async def called(session: ClientSession) -> str:
            result = await session.call_tool(name, parsed)
            parts = [
                getattr(part, "text", None) or json.dumps(part.model_dump(mode="json", exclude_none=True))
                for part in result.content
            ]
            text = "\n".join(parts)
            if not parts and result.structured_content is not None:
                text = json.dumps(result.structured_content)
            if result.is_error:
                content = [part.model_dump(mode="json", exclude_none=True) for part in result.content]
                detail = McpToolExecutionError(type="mcp_tool_execution_error", content=content)
                raise McpError(text[: self.max_chars] or "the tool reported an error", detail)
            if len(text) > self.max_chars:
                return text[: self.max_chars] + f"\n[cut at {self.max_chars} characters]"
            return text

        return await self._session(called)

    async def _session(self, work: Callable[[ClientSession], Awaitable[T]]) -> T:
        """`work` in a session with the server, within the deadline."""
        transports = ["streamable", "sse"]
        if self.url.rstrip("/").endswith("/sse"):
            transports.reverse()
        failures = []
        try:
            with anyio.fail_after(self.seconds):
                for transport in transports:
                    try:
                        stack, session = await self._open(transport)
                    except Exception as error:  # the other transport may work
                        failures.append(_reason(error))
                        continue
                    async with stack:
                        return await work(session)
        except TimeoutError:
            message = f"{self.url} did not answer within {self.seconds:g} s"
            raise McpError(message, HTTPError(type="http_error", code=504, message=message)) from None
        except Exception as error:  # whatever the server did, the turn reports it
            raise _failure(self.url, error) from None
        raise McpError(f"no MCP session with {self.url}: {'; '.join(failures)}")

    async def _open(self, transport: str) -> tuple[AsyncExitStack, ClientSession]:
        """An initialised session over `transport`, and what closes it."""
        # The `mcp` client, imported when a turn first reaches a server (it is 1 s of the server's start).
        from mcp import ClientSession
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client

        stack = AsyncExitStack()
        try:
            if transport == "streamable":
                http = await stack.enter_async_context(self._client())
                streams = await stack.enter_async_context(streamable_http_client(self.url, http_client=http))
            else:
                streams = await stack.enter_async_context(
                    sse_client(self.url, httpx_client_factory=self._client)
                )
            session = await stack.enter_async_context(ClientSession(*streams[:2]))
            await session.initialize()
        except BaseException:
            await stack.aclose()
            raise
        return stack, session

    def _client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        """An HTTP client to the pinned address with the tool's headers (what the `sse_client` factory is
        asked for too: its own timeouts give way to the operation's deadline)."""
        return httpx2.AsyncClient(
            headers=self.headers, transport=_Pinned(self.pin), trust_env=False, timeout=self.seconds
        )


class _Pinned(httpx2.AsyncBaseTransport):
    """Every request to the pinned address, whatever the URL's host resolves to now; a request to any
    other origin is refused."""

    def __init__(self, pin: Pin) -> None:
        self.pin = pin
        # An idle connection is dropped after 3 s, before the 5 s at which uvicorn (the `mcp` package's
        # servers) and Node close theirs: a tool call sent on one as its server closes it is reset unanswered
        # (a turn's calls are often more than 5 s apart, while the model writes).
        kept = httpx2.Limits(keepalive_expiry=3.0)
        self.inner = httpx2.AsyncHTTPTransport(verify=machine.trust_store(), limits=kept)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.host != self.pin.host or (url.port or (443 if url.scheme == "https" else 80)) != self.pin.port:
            raise httpx2.ConnectError(f"{url.host} is not the MCP server's origin", request=request)
        request.url = url.copy_with(host=self.pin.address)
        request.headers["Host"] = self.pin.header
        request.extensions = {**request.extensions, **self.pin.extensions}
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _failure(url: str, error: BaseException) -> McpError:
    """An error the MCP client raised, as the turn shows it."""
    from mcp.shared.exceptions import MCPError

    inner = _innermost(error)
    if isinstance(inner, McpError):
        return inner  # raised by the work itself, inside the transport's task group
    message = f"{url}: {_reason(inner)}"
    if isinstance(inner, MCPError):
        return McpError(
            message, McpProtocolError(type="mcp_protocol_error", code=inner.code, message=inner.message)
        )
    if isinstance(inner, httpx2.HTTPStatusError):
        return McpError(
            message, HTTPError(type="http_error", code=inner.response.status_code, message=message)
        )
    return McpError(message)


def _innermost(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _reason(error: BaseException) -> str:
    """The innermost error's words (anyio's task groups wrap them)."""
    error = _innermost(error)
    return f"{type(error).__name__}: {error}"[:300]
