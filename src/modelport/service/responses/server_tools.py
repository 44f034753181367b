"""Tools the server runs in a Responses turn: `file_search` over the caller's vector stores, and the tools
of remote MCP servers (`mcp`). The model sees each as a function; when it calls one, the server runs it,
adds its item to the output (`file_search_call`, `mcp_call`), gives the model the result, and asks it
again, until it answers (or calls a function of the client's, or a call waits for the user's approval).

An MCP server's tools are listed once per conversation (an `mcp_list_tools` item; a later turn of the same
`previous_response_id` chain reuses the listing when the server and its `allowed_tools` are the same). A
call that needs approval (OpenAI's default) ends the turn with an `mcp_approval_request` item; the next
turn's `mcp_approval_response` item runs it (or tells the model it was declined)."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from openai.types.responses import (
    FileSearchTool,
    FunctionTool,
    ResponseFileSearchCallCompletedEvent,
    ResponseFileSearchCallInProgressEvent,
    ResponseFileSearchCallSearchingEvent,
    ResponseFileSearchToolCall,
    ResponseMcpCallArgumentsDeltaEvent,
    ResponseMcpCallArgumentsDoneEvent,
    ResponseMcpCallCompletedEvent,
    ResponseMcpCallFailedEvent,
    ResponseMcpCallInProgressEvent,
    ResponseMcpListToolsCompletedEvent,
    ResponseMcpListToolsFailedEvent,
    ResponseMcpListToolsInProgressEvent,
    ResponseStreamEvent,
    Tool,
    ToolChoiceAllowed,
    ToolChoiceMcp,
    ToolChoiceTypes,
)
from openai.types.responses.response_file_search_tool_call import Result
from openai.types.responses.response_output_item import (
    McpApprovalRequest,
    McpCall,
    McpListTools,
    McpListToolsTool,
)
from openai.types.responses.response_output_text import AnnotationFileCitation
from openai.types.responses.tool import Mcp

from modelport.errors import InvalidRequestError, NotFoundError
from modelport.protocol.response_request import ToolChoice
from modelport.protocol.validation import json_value
from modelport.service.fetching import Fetcher
from modelport.service.responses.items import NONE_ALLOWED, new_item_id
from modelport.service.responses.mcp_servers import McpError
from modelport.service.responses.response_events import ResponseEvents
from modelport.service.responses.tool_specs import FileSearchSpec, McpSpec, file_search_spec, mcp_spec
from modelport.service.vectors import VectorStores

SERVED = ("file_search", "mcp")  # tool types run here; the others are refused by `items`


def _names_served(choice: ToolChoice | None) -> TypeGuard[ToolChoiceTypes | ToolChoiceMcp]:
    """Whether a tool choice names a kind of tool the server runs (a file search, an MCP server's tool)."""
    return isinstance(choice, ToolChoiceTypes | ToolChoiceMcp) and choice.type in SERVED


FILE_SEARCH = "file_search"
_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)
_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_FILE_SEARCH_FUNCTION = {
    "type": "function",
    "function": {
        "name": FILE_SEARCH,
        "description": "Search the user's files for passages about a subject. Use it to answer from them.",
        "parameters": {
            "type": "object",
            # Bounded, so that a small model cannot ramble on in its query until the token budget ends.
            "properties": {
                "query": {"type": "string", "description": "Words to look for.", "maxLength": 100}
            },
            "required": ["query"],
        },
    },
}


@dataclass
class ServerTools:
    """The server-run tools of one turn, and what running them found (for citations)."""

    vector_stores: VectorStores
    file_search: FileSearchSpec | None = None
    mcp: list[McpSpec] = field(default_factory=list)
    include_results: bool = False
    taken: set[str] = field(default_factory=set)  # function names the client's tools use
    results: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)  # call id -> what the model is told
    waiting: bool = False  # a call waits for the user's approval: the turn ends
    approvals: list[dict[str, Any]] = field(default_factory=list)  # calls answered by approval, for the chat
    _named: dict[str, tuple[McpSpec, str]] = field(default_factory=dict)  # function -> server, tool

    def __bool__(self) -> bool:
        return self.file_search is not None or bool(self.mcp)

    @property
    def names(self) -> frozenset[str]:
        """The function names the model calls them by."""
        return frozenset(([FILE_SEARCH] if self.file_search else []) + list(self._named))

    @property
    def functions(self) -> list[dict[str, Any]]:
        """The chat tools that stand for them (an MCP server's, once listed)."""
        functions = [_FILE_SEARCH_FUNCTION] if self.file_search else []
        for name, (served, tool_name) in self._named.items():
            tool = next(t for t in served.tools if t["name"] == tool_name)
            described = {"name": name, "parameters": tool.get("input_schema") or {"type": "object"}}
            if tool.get("description"):
                described["description"] = tool["description"]
            functions.append({"type": "function", "function": described})
        return functions

    def decides(self, choice: ToolChoice | None) -> bool:
        """Whether `offer` sets the turn's tool choice (chat's own is then `auto` until it does): a choice of
        a tool the server runs, or `allowed_tools` while the server runs any."""
        return bool(self) and (isinstance(choice, ToolChoiceAllowed) or _names_served(choice))

    def offer(self, chat: Any, choice: ToolChoice | None) -> None:
        """Put the tools (an MCP server's once listed) into the chat request, with the tool choice that
        names one of them; under an `allowed_tools` choice, those it allows, in its mode."""
        kept = [t for t in chat.tools or [] if (t.get("function") or {}).get("name") not in self.names]
        functions = self.functions
        if isinstance(choice, ToolChoiceAllowed):
            functions = [f for f in functions if self._allowed(f["function"]["name"], choice.tools)]
        chat.tools = kept + functions or None
        if isinstance(choice, ToolChoiceAllowed):  # its mode, over the tools it allows of both kinds
            if chat.tools is None and choice.mode == "required":
                raise InvalidRequestError(NONE_ALLOWED, param="tool_choice")
            chat.tool_choice = choice.mode if chat.tools else None
        if _names_served(choice):
            chosen = self.chat_choice(choice)
            if chosen is None:
                named = choice.server_label if isinstance(choice, ToolChoiceMcp) else choice.type
                tool = getattr(choice, "name", None)
                raise InvalidRequestError(
                    f"tool_choice names {named}{'.' + tool if tool else ''}, which no tool offers.",
                    param="tool_choice",
                )
            chat.tool_choice = chosen

    def _allowed(self, function: str, allowed: list[dict[str, object]]) -> bool:
        """Whether an `allowed_tools` choice's list names the tool a function stands for: `file_search`,
        or an MCP server's tool (`{"type": "mcp", "server_label"}`, all its tools; with `name`, that one)."""
        if function == FILE_SEARCH:
            return any(tool.get("type") == FILE_SEARCH for tool in allowed)
        served, tool_name = self._named[function]
        return any(
            tool.get("type") == "mcp" and tool.get("server_label") == served.server.label
            and tool.get("name") in (None, tool_name)
            for tool in allowed
        )  # fmt: skip

    def chat_choice(self, choice: ToolChoiceTypes | ToolChoiceMcp) -> dict[str, Any] | None:
        """A `tool_choice` naming one of these tools, as a chat tool choice (None if it names none)."""
        if choice.type == FILE_SEARCH and self.file_search is not None:
            return {"type": "function", "function": {"name": FILE_SEARCH}}
        if isinstance(choice, ToolChoiceMcp):
            for name, (served, tool_name) in self._named.items():
                if served.server.label == choice.server_label and choice.name in (None, tool_name):
                    return {"type": "function", "function": {"name": name}}
        return None

    async def prepare(
        self, events: ResponseEvents, earlier: list[dict[str, Any]], turn: list[dict[str, Any]]
    ) -> AsyncGenerator[ResponseStreamEvent, None]:
        """Before the model is asked: list each MCP server's tools (or reuse an earlier turn's listing),
        then run the calls the turn's `mcp_approval_response` items approve (`approvals`, with what they
        found in `outputs`). `earlier` is the responses the turn continues, oldest first."""
        earlier_output = earlier[-1].get("output") or [] if earlier else []
        for served in self.mcp:
            reused = _reusable(served, earlier)
            if reused is not None:
                served.tools = served.offered(reused)
                continue
            item = McpListTools(
                id=new_item_id("mcpl"), type="mcp_list_tools", server_label=served.server.label, tools=[],
                error=None,
            )  # fmt: skip
            for event in events.add_item(item):
                yield event
            yield ResponseMcpListToolsInProgressEvent(
                type="response.mcp_list_tools.in_progress", **events.at(item)
            )
            try:
                served.tools = served.offered(await served.server.tools())
                item.tools = [McpListToolsTool.model_validate(tool) for tool in served.tools]
                yield ResponseMcpListToolsCompletedEvent(
                    type="response.mcp_list_tools.completed", **events.at(item)
                )
            except McpError as error:
                item.error = str(error)
                yield ResponseMcpListToolsFailedEvent(
                    type="response.mcp_list_tools.failed", **events.at(item)
                )
            for event in events.done_item(item):
                yield event
        self._name_functions()
        asked = {i["id"]: i for i in [*earlier_output, *turn] if i.get("type") == "mcp_approval_request"}
        # A client that sends its whole history each turn (the OpenAI Agents SDK) sends earlier approvals
        # again beside the calls they ran: a call runs once, whatever comes back.
        history = [item for response in earlier for item in response.get("output") or []] + turn
        ran = {i.get("approval_request_id") for i in history if i.get("type") == "mcp_call"}
        for answer in (i for i in turn if i.get("type") == "mcp_approval_response"):
            if answer["approval_request_id"] in ran:
                continue
            request = asked.get(answer["approval_request_id"])
            if request is None:
                raise NotFoundError(
                    f"No mcp_approval_request '{answer['approval_request_id']}' in the previous response or "
                    "this input.",
                    param="input",
                )
            call = {
                "id": request["id"],
                "function": {"name": request["name"], "arguments": request["arguments"]},
            }
            self.approvals.append(call)
            if answer.get("approve"):
                async for event in self._call(call, events, approved=request):
                    yield event
            else:
                self.outputs[call["id"]] = "The user did not approve this call."

    async def run(
        self, call: dict[str, Any], events: ResponseEvents
    ) -> AsyncGenerator[ResponseStreamEvent, None]:
        """Run one call, with the events of its item; what the model is told is kept in `outputs`."""
        function = call.get("function") or {}
        if function.get("name") == FILE_SEARCH and self.file_search is not None:
            async for event in self._search(call["id"], function.get("arguments") or "", events):
                yield event
            return
        async for event in self._call(call, events):
            yield event

    def unran(self, call: dict[str, Any]) -> ResponseFileSearchToolCall | McpCall:
        """The item of a call the token budget cut while the model wrote it: what was written of it, never
        run, `incomplete` (as OpenAI keeps a call a response ended inside)."""
        function = call.get("function") or {}
        arguments = function.get("arguments") or ""
        if function.get("name") == FILE_SEARCH:
            begun = _BEGUN_QUERY.match(arguments)  # the arguments' JSON, cut inside the query
            query = begun.group(1) if begun else "" if arguments.lstrip().startswith("{") else arguments
            return ResponseFileSearchToolCall(
                id=new_item_id("fs"), type="file_search_call", status="incomplete",
                queries=[query] if query else [], results=None,
            )  # fmt: skip
        served, tool_name = self._named.get(function.get("name") or "", (None, ""))
        label = served.server.label if served else ""
        return McpCall(
            id=new_item_id("mcp"), type="mcp_call", server_label=label, name=tool_name, arguments=arguments,
            output=None, error=None, status="incomplete",
        )  # fmt: skip

    def annotate(self, text: str) -> list[AnnotationFileCitation]:
        """Citations for an answer: the files of the results it draws on (shares words with), or else of
        the best result, each once, at the end of the text."""
        if not self.results:
            return []
        words = {w.lower() for w in _WORD.findall(text)}
        used = [r for r in self.results if words & {w.lower() for w in _WORD.findall(r["text"])}]
        cited: dict[str, str] = {}
        for result in used or self.results[:1]:
            cited.setdefault(result["file_id"], result["filename"])
        return [
            AnnotationFileCitation(type="file_citation", file_id=file_id, filename=name, index=len(text))
            for file_id, name in cited.items()
        ]

    async def _call(
        self, call: dict[str, Any], events: ResponseEvents, approved: dict[str, Any] | None = None
    ) -> AsyncGenerator[ResponseStreamEvent, None]:
        """An MCP tool call: asked about (the turn then ends) unless approved or approval is not needed;
        else run, as an `mcp_call` item with its output or error."""
        function = call.get("function") or {}
        served, tool_name = self._named.get(function.get("name") or "", (None, ""))
        if approved is not None:
            served = next((m for m in self.mcp if m.server.label == approved["server_label"]), None)
            tool_name = approved["name"]
        arguments = function.get("arguments") or "{}"
        if served is None:
            self.outputs[call["id"]] = f"There is no tool {function.get('name')!r}."
            return
        if approved is None and served.needs_approval(tool_name):
            asking = McpApprovalRequest(
                id=new_item_id("mcpr"), type="mcp_approval_request", server_label=served.server.label,
                name=tool_name, arguments=arguments,
            )  # fmt: skip
            for event in events.add_item(asking) + events.done_item(asking):
                yield event
            self.waiting = True
            return
        item = McpCall(
            id=new_item_id("mcp"), type="mcp_call", server_label=served.server.label, name=tool_name,
            arguments=arguments, output=None, error=None, status="in_progress",
            approval_request_id=approved["id"] if approved else None,
        )  # fmt: skip
        for event in events.add_item(item):
            yield event
        # The model's call arrives whole (its tool call is parsed once complete): one delta, then done,
        # as OpenAI streams a call's arguments and the SDK types both.
        yield ResponseMcpCallArgumentsDeltaEvent(
            type="response.mcp_call_arguments.delta", delta=arguments, **events.at(item)
        )
        yield ResponseMcpCallArgumentsDoneEvent(
            type="response.mcp_call_arguments.done", arguments=arguments, **events.at(item)
        )
        yield ResponseMcpCallInProgressEvent(type="response.mcp_call.in_progress", **events.at(item))
        try:
            output = await served.server.call(tool_name, arguments)
            item.output, item.status = output, "completed"
            self.outputs[call["id"]] = output
            yield ResponseMcpCallCompletedEvent(type="response.mcp_call.completed", **events.at(item))
        except McpError as error:
            item.status, item.error = "failed", error.detail
            self.outputs[call["id"]] = f"The call failed: {error}"
            yield ResponseMcpCallFailedEvent(type="response.mcp_call.failed", **events.at(item))
        for event in events.done_item(item):
            yield event

    async def _search(
        self, call_id: str, arguments: str, events: ResponseEvents
    ) -> AsyncGenerator[ResponseStreamEvent, None]:
        tool = self.file_search
        assert tool is not None
        query = _query(arguments) or "(nothing)"
        item = ResponseFileSearchToolCall(
            id=new_item_id("fs"), type="file_search_call", status="in_progress", queries=[query], results=None
        )
        for event in events.add_item(item):
            yield event
        yield ResponseFileSearchCallInProgressEvent(
            type="response.file_search_call.in_progress", **events.at(item)
        )
        yield ResponseFileSearchCallSearchingEvent(
            type="response.file_search_call.searching", **events.at(item)
        )
        found = await self.vector_stores.find(
            tool.store_ids, [query], tool.filters, tool.limit, tool.ranking, f"{tool.where}."
        )
        results = [
            {
                "file_id": hit.result.file_id,
                "filename": hit.result.filename,
                "score": hit.result.score,
                "attributes": hit.result.attributes,
                "text": hit.result.content[0].text,
                "vector_store_id": hit.store_id,
            }
            for hit in found
        ]
        self.results += results
        self.outputs[call_id] = _told(results)
        item.status = "completed"
        if self.include_results:
            item.results = [Result.model_validate(result) for result in results]
        yield ResponseFileSearchCallCompletedEvent(
            type="response.file_search_call.completed", **events.at(item)
        )
        for event in events.done_item(item):
            yield event

    def _name_functions(self) -> None:
        """The function name of each listed MCP tool: its own name, or `label__name` where that is taken."""
        counts: dict[str, int] = {}
        for served in self.mcp:
            for tool in served.tools:
                counts[tool["name"]] = counts.get(tool["name"], 0) + 1
        for served in self.mcp:
            for tool in served.tools:
                name = _NAME.sub("_", tool["name"])
                if counts[tool["name"]] > 1 or name in self.taken or name == FILE_SEARCH:
                    name = _NAME.sub("_", f"{served.server.label}__{tool['name']}")
                self._named[name] = (served, tool["name"])


async def server_tools(
    tools: list[Tool],
    include: list[str],
    vector_stores: VectorStores,
    fetcher: Fetcher,
    mcp_seconds: float,
    mcp_chars: int,
) -> ServerTools:
    """The tools of a request that the server runs, checked before the turn starts: a file search's stores
    exist and are the caller's and its filters are well formed; an MCP server's URL passes the outbound
    guard."""
    served = ServerTools(vector_stores, include_results="file_search_call.results" in include)
    labels: set[str] = set()
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if isinstance(tool, FunctionTool):
            served.taken.add(tool.name)
        elif isinstance(tool, FileSearchTool):
            if served.file_search is not None:
                raise InvalidRequestError(f"{where}: a request may have one file_search tool.", param=where)
            served.file_search = await file_search_spec(tool, where, vector_stores)
        elif isinstance(tool, Mcp):
            found = await mcp_spec(tool, where, fetcher, mcp_seconds, mcp_chars)
            if found.server.label in labels:
                raise InvalidRequestError(
                    f"{where}.server_label {found.server.label!r} is used twice.",
                    param=f"{where}.server_label",
                )
            labels.add(found.server.label)
            served.mcp.append(found)
    return served


def answered(calls: list[dict[str, Any]], said: str | None, outputs: dict[str, str]) -> list[dict[str, Any]]:
    """The chat messages of server-run calls and what each found: the assistant's calls, then a tool
    message per call."""
    if not calls:
        return []
    plain = [
        {"id": c["id"], "type": "function", "function": {
            "name": (c.get("function") or {}).get("name") or "",
            "arguments": (c.get("function") or {}).get("arguments") or "",
        }}
        for c in calls
    ]  # fmt: skip
    asked = {"role": "assistant", "content": said or None, "tool_calls": plain}
    return [asked, *({"role": "tool", "tool_call_id": c["id"], "content": outputs[c["id"]]} for c in calls)]


def _reusable(served: McpSpec, earlier: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The latest listing of this server in the turns this one continues, when each turn since had the
    same server and allowed tools."""
    for response in reversed(earlier):
        same = any(
            t.get("type") == "mcp" and t.get("server_label") == served.server.label
            and t.get("server_url") == served.server.url
            and t.get("allowed_tools") == served.allowed_sent
            for t in response.get("tools") or []
        )  # fmt: skip
        if not same:
            return None
        for item in response.get("output") or []:
            if item.get("type") == "mcp_list_tools" and item.get("server_label") == served.server.label:
                return None if item.get("error") else list(item.get("tools") or [])
    return None


_BEGUN_QUERY = re.compile(r'\s*\{\s*"(?:query|q)"\s*:\s*"((?:[^"\\]|\\.)*)')


def _query(arguments: str) -> str:
    """The query a model's call asks for (its arguments as they came, when they are not the JSON asked)."""
    try:
        parsed = json_value(arguments)
    except ValueError:
        return arguments.strip()
    if isinstance(parsed, dict):
        for name in ("query", "queries", "q"):
            value = parsed.get(name)
            if isinstance(value, list):
                value = " ".join(str(v) for v in value)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return arguments.strip()


def _told(results: list[dict[str, Any]]) -> str:
    if not results:
        return "No passages were found."
    return "\n\n".join(f"[{i}] From {r['filename']}:\n{r['text']}" for i, r in enumerate(results, 1))
