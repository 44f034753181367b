"""`AsyncOpenAI`: the `openai` SDK's own async client, with its requests answered by the service in this
process instead of sent over HTTP. Every resource, `.with_raw_response`, `.with_streaming_response`,
`.parse()`, the `.stream()` helpers and pagination are the SDK's; only `request()` is ours."""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any, TypeVar

import httpx2
import openai
from pydantic import BaseModel

from modelport.client.arguments import build_service
from modelport.client.dispatch import BASE_URL, NO_KEY, Dispatch, http_response, whole
from modelport.client.realtime_pipes import LocalAsyncRealtime
from modelport.client.sdk_errors import sdk_errors
from modelport.client.streams import LocalAsyncStream
from modelport.protocol.answers import Binary, Events
from modelport.protocol.sdk_private import AsyncStreamT, FinalRequestOptions, is_given
from modelport.settings import Settings

ResponseT = TypeVar("ResponseT")


class AsyncOpenAI(openai.AsyncOpenAI):
    """Drop-in for `openai.AsyncOpenAI` that runs the models in this process.

    With no arguments it serves the default models, each loaded on first use. `config` reads a
    `models.toml`; `service` shares one already built (with `OpenAI` or a server). `api_key`, when given,
    is checked as the server checks a bearer key (its project, limits and allowed models apply); without
    one, calls are the default project's. The SDK's other options are accepted; `base_url` is ignored.
    """

    def __init__(
        self,
        *,
        config: str | os.PathLike[str] | None = None,
        settings: Settings | None = None,
        service: Any = None,
        preload: bool = False,
        api_key: str | None = None,
        **options: Any,
    ) -> None:
        self.service = build_service(service, settings, config, preload)
        self._owns_service = service is None
        self._dispatch = Dispatch(self.service, api_key)
        options.pop("base_url", None)
        options.setdefault("max_retries", 0)  # nothing crosses a network here to retry
        super().__init__(api_key=api_key or NO_KEY, base_url=BASE_URL, **options)

    @cached_property
    def realtime(self) -> LocalAsyncRealtime:
        """The Realtime API; `connect()` opens a session in this process, no socket."""
        return LocalAsyncRealtime(self)

    async def request(
        self,
        cast_to: type[ResponseT],
        options: FinalRequestOptions,
        *,
        stream: bool = False,
        stream_cls: type[AsyncStreamT] | None = None,
    ) -> Any:
        """The SDK's one chokepoint: answered by the service."""
        cast_to = self._maybe_override_cast_to(cast_to, options)
        answer, headers = await self._dispatch.answer(options)
        raw = self._dispatch.raw(options)
        path = self._dispatch.path(options)
        if not raw and isinstance(answer, Events):
            return LocalAsyncStream(answer, path, self, cast_to)
        if not raw and not isinstance(answer, Binary):
            return parsed(self, whole(answer), cast_to, options)
        response = http_response(answer, options, headers)
        with sdk_errors(path):
            return await self._process_response(
                cast_to=cast_to, options=options, response=response, stream=stream, stream_cls=stream_cls
            )

    async def close(self) -> None:
        """Stop probing upstreams, running batches and close connections, if this client built its
        service."""
        if self._owns_service:
            await self.service.close()
        await super().close()


def parsed(client: Any, data: Any, cast_to: Any, options: FinalRequestOptions) -> Any:
    """A whole answer as `cast_to`, as the SDK makes it from a body (the service's own object when it
    already is one), then through the request's `post_parser` (pages, `.parse()`)."""
    if isinstance(cast_to, type) and isinstance(data, cast_to):
        result = data
    else:
        if isinstance(data, BaseModel) and not isinstance(data, openai.BaseModel):
            # A type of ours (a page, say) that the SDK reads as one of its own: from its JSON, as over HTTP.
            data = data.model_dump(mode="json", warnings=False, by_alias=True)
        response = httpx2.Response(200, request=httpx2.Request(options.method, BASE_URL + options.url))
        result = client._process_response_data(data=data, cast_to=cast_to, response=response)
    if is_given(options.post_parser):
        result = options.post_parser(result)
    return result
