"""The server-run tools of a Responses request, checked before the turn starts: a `file_search` tool's stores
exist and are the caller's and its filters are well formed; an `mcp` tool's URL passes the outbound guard,
and its allowed tools and approval rules are well formed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openai.types.responses import Tool

from modelport.errors import InvalidRequestError, NotFoundError
from modelport.protocol.validation import by_type, check_as
from modelport.service.fetching import Fetcher
from modelport.service.responses.mcp_servers import McpServer
from modelport.service.vectors import VectorStores, filters

_DEFAULT_RESULTS = (
    5  # results a search gives the model: enough to answer from, few enough for a small context
)


@dataclass
class FileSearchSpec:
    """A `file_search` tool: its stores and search options."""

    store_ids: list[str]
    filters: dict[str, Any] | None
    limit: int
    ranking: dict[str, Any] | None
    where: str


@dataclass
class McpSpec:
    """An `mcp` tool: its server, which of its tools may be used, which need approval, and (once listed)
    the tools it offers."""

    server: McpServer
    allowed: list[str] | None
    read_only: bool
    approval: str | dict[str, Any]
    spec: dict[str, Any]
    tools: list[dict[str, Any]] = field(default_factory=list)

    def needs_approval(self, name: str) -> bool:
        if isinstance(self.approval, str):
            return self.approval != "never"
        for answer in ("never", "always"):
            names = (self.approval.get(answer) or {}).get("tool_names") or []
            if name in names:
                return answer == "always"
        return True  # OpenAI's default: a tool not named is asked about

    def offered(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tools of a listing the request allows."""
        kept = [t for t in tools if self.allowed is None or t["name"] in self.allowed]
        if self.read_only:
            kept = [t for t in kept if (t.get("annotations") or {}).get("readOnlyHint")]
        return kept


_CREDENTIALS = ("headers", "authorization")
# Each tool type's model in the `openai` package, by its `type`.
TOOLS = by_type(Tool)


def with_defaults(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as a response echoes it, with the defaults it ran with filled in: a function's `strict` (its
    calls are held to the schema here whatever it says, as OpenAI's default `true` promises), its
    `description` and `parameters` as null when not given; a `file_search` tool's limits, ranking and
    `filters` (required by the OpenResponses schema, null when none)."""
    if tool.get("type") == "function":
        return {"description": None, "parameters": None, "strict": True, **tool}
    if tool.get("type") != "file_search":
        return tool
    ranking = {"ranker": "auto", "score_threshold": 0.0, **(tool.get("ranking_options") or {})}
    limit = tool.get("max_num_results") or _DEFAULT_RESULTS
    return {"filters": None, **tool, "max_num_results": limit, "ranking_options": ranking}


def echoed(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools as a response shows and stores them: with the defaults they ran with (`with_defaults`), an MCP
    server's credentials (`headers`, `authorization`) left out."""
    return [
        with_defaults({k: v for k, v in t.items() if k not in _CREDENTIALS} if t.get("type") == "mcp" else t)
        for t in tools
    ]


async def file_search_spec(tool: dict[str, Any], where: str, vector_stores: VectorStores) -> FileSearchSpec:
    store_ids = tool.get("vector_store_ids")
    if not isinstance(store_ids, list) or not store_ids or not all(isinstance(s, str) for s in store_ids):
        raise InvalidRequestError(
            f"{where}.vector_store_ids must be a non-empty list of vector store ids.",
            param=f"{where}.vector_store_ids",
        )
    for store_id in store_ids:
        try:
            await vector_stores.retrieve(store_id)
        except NotFoundError as error:
            error.param = f"{where}.vector_store_ids"
            raise
    limit = tool.get("max_num_results", _DEFAULT_RESULTS)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 50:
        raise InvalidRequestError(
            f"{where}.max_num_results must be from 1 to 50.", param=f"{where}.max_num_results"
        )
    rule = tool.get("filters")
    if rule is not None:
        filters.checked_filter(rule, f"{where}.filters")
    # The rest as the SDK types it (a string `ranking_options`: a 400, not a 500).
    check_as(TOOLS, tool, where)
    return FileSearchSpec(store_ids, rule, limit, tool.get("ranking_options"), where)


async def mcp_spec(tool: dict[str, Any], where: str, fetcher: Fetcher, seconds: float, chars: int) -> McpSpec:
    label, url = tool.get("server_label"), tool.get("server_url")
    if tool.get("connector_id"):
        raise InvalidRequestError(
            f"{where}.connector_id names one of OpenAI's hosted connectors, which this server cannot reach; "
            "give the server_url of an MCP server instead.",
            param=f"{where}.connector_id",
        )
    if not isinstance(label, str) or not label:
        raise InvalidRequestError(f"{where}.server_label is required.", param=f"{where}.server_label")
    if not isinstance(url, str) or not url:
        raise InvalidRequestError(f"{where}.server_url is required.", param=f"{where}.server_url")
    headers = tool.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise InvalidRequestError(f"{where}.headers must map names to strings.", param=f"{where}.headers")
    authorization = tool.get("authorization")
    if authorization is not None:
        if not isinstance(authorization, str) or not authorization.strip():
            raise InvalidRequestError(
                f"{where}.authorization must be an access token (a string).", param=f"{where}.authorization"
            )
        # OpenAI: "an OAuth access token that can be used with a remote MCP server", sent as a bearer token.
        headers = {**headers, "Authorization": f"Bearer {authorization.strip()}"}
    allowed = tool.get("allowed_tools")
    read_only = False
    if isinstance(allowed, dict):
        read_only = bool(allowed.get("read_only"))
        allowed = allowed.get("tool_names")
    if allowed is not None and (
        not isinstance(allowed, list) or not all(isinstance(n, str) for n in allowed)
    ):
        raise InvalidRequestError(
            f"{where}.allowed_tools must be a list of tool names or {{tool_names, read_only}}.",
            param=f"{where}.allowed_tools",
        )
    approval = tool.get("require_approval", "always")
    if approval is None:
        approval = "always"
    if not (approval in ("always", "never") or isinstance(approval, dict)):
        raise InvalidRequestError(
            f"{where}.require_approval must be always, never or {{always, never}} with tool_names.",
            param=f"{where}.require_approval",
        )
    pin = await fetcher.pin(url, f"{where}.server_url")
    server = McpServer(label, url, headers, pin, seconds, chars)
    return McpSpec(server, allowed, read_only, approval, tool)
