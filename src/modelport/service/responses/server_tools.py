"""Tools the server runs in a Responses turn: `file_search` over the caller's vector stores (and remote MCP
servers' tools, `mcp_tools`). The model sees each as a function; when it calls one, the server runs it,
adds its item to the output (`file_search_call`, `mcp_call`), gives the model the result, and asks it
again, until it answers (or calls a function of the client's)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from modelport.errors import InvalidRequestError, NotFoundError
from modelport.service.responses.events import ResponseEvents
from modelport.service.responses.items import new_id
from modelport.service.vectors import VectorStores, filters

SERVED = ("file_search",)  # tool types run here; the others are refused by `items`
FILE_SEARCH = "file_search"
_DEFAULT_RESULTS = (
    5  # results a search gives the model: enough to answer from, few enough for a small context
)
_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)
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
class _FileSearch:
    """A `file_search` tool: its stores and search options."""

    store_ids: list[str]
    filters: dict[str, Any] | None
    limit: int
    ranking: dict[str, Any] | None
    where: str


@dataclass
class ServerTools:
    """The server-run tools of one turn, and what running them found (for citations)."""

    vector_stores: VectorStores
    file_search: _FileSearch | None = None
    include_results: bool = False
    results: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)  # call id -> what the model is told

    def __bool__(self) -> bool:
        return self.file_search is not None

    @property
    def names(self) -> frozenset[str]:
        """The function names the model calls them by."""
        return frozenset([FILE_SEARCH] if self.file_search else [])

    @property
    def functions(self) -> list[dict[str, Any]]:
        """The chat tools that stand for them."""
        return [_FILE_SEARCH_FUNCTION] if self.file_search else []

    def chat_choice(self, choice: dict[str, Any]) -> dict[str, Any] | None:
        """A `tool_choice` naming one of these tools, as a chat tool choice (None if it names none)."""
        if choice.get("type") == FILE_SEARCH and self.file_search is not None:
            return {"type": "function", "function": {"name": FILE_SEARCH}}
        return None

    async def run(self, call: dict[str, Any], events: ResponseEvents) -> AsyncGenerator[dict[str, Any], None]:
        """Run one call, with the events of its item; what the model is told is kept in `outputs`."""
        function = call.get("function") or {}
        async for event in self._search(call["id"], function.get("arguments") or "", events):
            yield event

    def annotate(self, text: str) -> list[dict[str, Any]]:
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
            {"type": "file_citation", "file_id": file_id, "filename": name, "index": len(text)}
            for file_id, name in cited.items()
        ]

    async def _search(
        self, call_id: str, arguments: str, events: ResponseEvents
    ) -> AsyncGenerator[dict[str, Any], None]:
        tool = self.file_search
        assert tool is not None
        query = _query(arguments) or "(nothing)"
        item: dict[str, Any] = {
            "id": new_id("fs"),
            "type": "file_search_call",
            "status": "in_progress",
            "queries": [query],
            "results": None,
        }
        for event in events.add_item(item):
            yield event
        yield events.item_event("response.file_search_call.in_progress", item)
        yield events.item_event("response.file_search_call.searching", item)
        found = await self.vector_stores.find(
            tool.store_ids, [query], tool.filters, tool.limit, tool.ranking, f"{tool.where}."
        )
        results = [
            {
                "file_id": r["file_id"],
                "filename": r["filename"],
                "score": r["score"],
                "attributes": r["attributes"],
                "text": r["content"][0]["text"],
            }
            for r in found
        ]
        self.results += results
        self.outputs[call_id] = _told(results)
        item.update(status="completed", results=results if self.include_results else None)
        yield events.item_event("response.file_search_call.completed", item)
        for event in events.done_item(item):
            yield event


async def server_tools(
    tools: list[dict[str, Any]], include: list[str], vector_stores: VectorStores
) -> ServerTools:
    """The tools of a request that the server runs, checked (their stores exist and are the caller's,
    their filters are well formed) before the turn starts."""
    served = ServerTools(vector_stores, include_results="file_search_call.results" in include)
    for i, tool in enumerate(tools):
        if tool.get("type") != FILE_SEARCH:
            continue
        where = f"tools[{i}]"
        if served.file_search is not None:
            raise InvalidRequestError(f"{where}: a request may have one file_search tool.", param=where)
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
            filters.checked(rule, f"{where}.filters")
        served.file_search = _FileSearch(store_ids, rule, limit, tool.get("ranking_options"), where)
    return served


def _query(arguments: str) -> str:
    """The query a model's call asks for (its arguments as they came, when they are not the JSON asked)."""
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
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
