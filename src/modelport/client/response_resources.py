"""`client.responses` in-process: the SDK's Responses surface over the service, its stream helper and
`parse` included."""

from __future__ import annotations

from typing import Any

from openai import omit
from openai._models import construct_type
from openai.lib._parsing._responses import parse_response, type_to_text_format_param
from openai.lib.streaming.responses import AsyncResponseStreamManager
from openai.types.responses import ParsedResponse, Response, ResponseItem

from modelport.client.arguments import request
from modelport.client.local_files import inlined
from modelport.client.paginators import AsyncPaginator
from modelport.client.sdk_errors import sdk_errors
from modelport.client.sdk_render import render
from modelport.protocol.response_request import ResponseRequest
from modelport.service import Service
from modelport.service.state.listing import ListPage


class AsyncResponses:
    """`client.responses`."""

    def __init__(self, service: Service) -> None:
        self._service = service
        self.input_items = AsyncInputItems(service)

    async def create(self, **params: Any) -> Any:
        """Same arguments as `openai.AsyncOpenAI().responses.create`: a `Response`, or with `stream=True`
        its typed events."""
        with sdk_errors("/responses"):
            params = await inlined(params, "input", self._service.settings.limits.fetch_bytes)
            answer = await self._service.responses.create(request(ResponseRequest, params))
        return await render(answer, "/responses")

    async def retrieve(
        self, response_id: str, *, stream: bool = False, starting_after: int | None = None, **_: Any
    ) -> Any:
        """A stored response, or with `stream=True` its events after `starting_after`."""
        path = f"/responses/{response_id}"
        with sdk_errors(path):
            answer = await self._service.responses.retrieve(response_id, stream, starting_after)
        return await render(answer, path)

    async def delete(self, response_id: str, **_: Any) -> None:
        """Delete a stored response."""
        with sdk_errors(f"/responses/{response_id}"):
            await self._service.responses.delete(response_id)

    async def cancel(self, response_id: str, **_: Any) -> Response:
        """Cancel a background response."""
        with sdk_errors(f"/responses/{response_id}/cancel"):
            return await self._service.responses.cancel(response_id)

    async def parse(
        self, *, text_format: Any = omit, tools: Any = omit, **params: Any
    ) -> ParsedResponse[Any]:
        """Same as `openai.AsyncOpenAI().responses.parse`: the output parsed into `text_format` (a pydantic
        model) and strict function tools' arguments into theirs."""
        if text_format is not omit:
            params["text"] = {**(params.get("text") or {}), "format": type_to_text_format_param(text_format)}
        if tools is not omit:
            params["tools"] = tools
        whole = await self.create(**params)
        return parse_response(text_format=text_format, input_tools=tools, response=whole)

    def stream(
        self,
        *,
        response_id: str | None = None,
        text_format: Any = omit,
        tools: Any = omit,
        starting_after: int | None = None,
        **params: Any,
    ) -> AsyncResponseStreamManager[Any]:
        """Same as `openai.AsyncOpenAI().responses.stream`: `async with` it for the SDK's own stream helper
        (`async for` events, `get_final_response()`); `response_id` resumes a background response."""
        if response_id is not None:
            started = self.retrieve(response_id, stream=True, starting_after=starting_after)
        else:
            if text_format is not omit:
                params["text"] = {
                    **(params.get("text") or {}),
                    "format": type_to_text_format_param(text_format),
                }
            if tools is not omit:
                params["tools"] = tools
            started = self.create(**params, stream=True)
        return AsyncResponseStreamManager(
            started, text_format=text_format, input_tools=tools, starting_after=starting_after
        )


class AsyncInputItems:
    """`client.responses.input_items`."""

    def __init__(self, service: Service) -> None:
        self._service = service

    def list(
        self,
        response_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        **_: Any,
    ) -> AsyncPaginator[Any]:
        """The input items of a stored response, newest first unless `order="asc"`."""

        async def fetch(cursor: str | None) -> ListPage[Any]:
            page = await self._service.responses.input_items(
                response_id, after=cursor or after, limit=limit, order=order
            )
            return ListPage(
                [construct_type(type_=ResponseItem, value=item) for item in page.data], page.has_more
            )

        return AsyncPaginator(fetch, f"/responses/{response_id}/input_items")
