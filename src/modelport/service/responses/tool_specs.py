"""The server-run tools of a Responses request, checked before the turn starts: a `file_search` tool's stores
exist and are the caller's and its filters are well formed; an `mcp` tool's URL passes the outbound guard,
and its allowed tools and approval rules are well formed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openai.types.responses import FileSearchTool, FunctionTool, Tool
from openai.types.responses.file_search_tool import RankingOptions
from openai.types.responses.tool import Mcp
from openai.types.responses.tool import McpAllowedToolsMcpToolFilter as McpToolFilter
from openai.types.responses.tool import McpRequireApprovalMcpToolApprovalFilter as McpToolApprovalFilter

from modelport.errors import InvalidRequestError, NotFoundError
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
    approval: McpToolApprovalFilter | str
    allowed_sent: Any  # `allowed_tools` as the request wrote it (a later turn reuses a listing for the same)
    tools: list[dict[str, Any]] = field(default_factory=list)

    def needs_approval(self, name: str) -> bool:
        if isinstance(self.approval, str):
            return self.approval != "never"
        for answer, rule in (("never", self.approval.never), ("always", self.approval.always)):
            if rule is not None and name in (rule.tool_names or []):
                return answer == "always"
        return True  # OpenAI's default: a tool not named is asked about

    def offered(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tools of a listing the request allows."""
        kept = [t for t in tools if self.allowed is None or t["name"] in self.allowed]
        if self.read_only:
            kept = [t for t in kept if (t.get("annotations") or {}).get("readOnlyHint")]
        return kept


_CREDENTIALS = {"headers", "authorization"}


def with_defaults(tool: Tool) -> Tool:
    """A tool as a response echoes it, with the defaults it ran with filled in: a function's `strict` (its
    calls are held to the schema here whatever it says, as OpenAI's default `true` promises), its
    `description` and `parameters` as null when not given; a `file_search` tool's limits, ranking and
    `filters` (required by the OpenResponses schema, null when none)."""
    if isinstance(tool, FunctionTool):
        strict = True if tool.strict is None else tool.strict
        given = {"description": tool.description, "parameters": tool.parameters, "strict": strict}
        return tool.model_copy(update=given)  # set, so that the echo has them (null when not given)
    if not isinstance(tool, FileSearchTool):
        return tool
    sent = tool.ranking_options.to_dict(mode="json") if tool.ranking_options is not None else {}
    ranking = RankingOptions.model_validate({"ranker": "auto", "score_threshold": 0.0, **sent})
    limit = tool.max_num_results or _DEFAULT_RESULTS
    return tool.model_copy(
        update={"filters": tool.filters, "max_num_results": limit, "ranking_options": ranking}
    )


def echoed(tools: list[Tool]) -> list[Tool]:
    """Tools as a response shows and stores them: with the defaults they ran with (`with_defaults`), an MCP
    server's credentials (`headers`, `authorization`) left out."""
    return [with_defaults(_without_credentials(t) if isinstance(t, Mcp) else t) for t in tools]


def _without_credentials(tool: Mcp) -> Mcp:
    sent = tool.to_dict(mode="json")  # as the request gave it
    return Mcp.model_validate({k: v for k, v in sent.items() if k not in _CREDENTIALS})


async def file_search_spec(tool: FileSearchTool, where: str, vector_stores: VectorStores) -> FileSearchSpec:
    if not tool.vector_store_ids:
        raise InvalidRequestError(
            f"{where}.vector_store_ids must be a non-empty list of vector store ids.",
            param=f"{where}.vector_store_ids",
        )
    for store_id in tool.vector_store_ids:
        try:
            await vector_stores.retrieve(store_id)
        except NotFoundError as error:
            error.param = f"{where}.vector_store_ids"
            raise
    limit = tool.max_num_results if tool.max_num_results is not None else _DEFAULT_RESULTS
    if not 1 <= limit <= 50:
        raise InvalidRequestError(
            f"{where}.max_num_results must be from 1 to 50.", param=f"{where}.max_num_results"
        )
    rule = tool.filters.to_dict(mode="json") if tool.filters is not None else None
    if rule is not None:
        filters.checked_filter(rule, f"{where}.filters")
    ranking = tool.ranking_options.to_dict(mode="json") if tool.ranking_options is not None else None
    return FileSearchSpec(list(tool.vector_store_ids), rule, limit, ranking, where)


async def mcp_spec(tool: Mcp, where: str, fetcher: Fetcher, seconds: float, chars: int) -> McpSpec:
    if tool.connector_id:
        raise InvalidRequestError(
            f"{where}.connector_id names one of OpenAI's hosted connectors, which this server cannot reach; "
            "give the server_url of an MCP server instead.",
            param=f"{where}.connector_id",
        )
    if not tool.server_label:
        raise InvalidRequestError(f"{where}.server_label is required.", param=f"{where}.server_label")
    if not tool.server_url:
        raise InvalidRequestError(f"{where}.server_url is required.", param=f"{where}.server_url")
    headers = dict(tool.headers or {})
    if tool.authorization is not None:
        if not tool.authorization.strip():
            raise InvalidRequestError(
                f"{where}.authorization must be an access token (a string).", param=f"{where}.authorization"
            )
        # OpenAI: "an OAuth access token that can be used with a remote MCP server", sent as a bearer token.
        headers = {**headers, "Authorization": f"Bearer {tool.authorization.strip()}"}
    allowed, read_only = tool.allowed_tools, False
    if isinstance(allowed, McpToolFilter):
        read_only, allowed = bool(allowed.read_only), allowed.tool_names
    approval = tool.require_approval if tool.require_approval is not None else "always"
    pin = await fetcher.pin(tool.server_url, f"{where}.server_url")
    server = McpServer(tool.server_label, tool.server_url, headers, pin, seconds, chars)
    sent = tool.to_dict(mode="json").get("allowed_tools")
    return McpSpec(server, list(allowed) if allowed is not None else None, read_only, approval, sent)
