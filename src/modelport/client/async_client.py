"""`AsyncOpenAI`: the `openai` SDK's own async client, with its requests answered by the service in this
process instead of sent over HTTP. Every resource, `.with_raw_response`, `.with_streaming_response`,
`.parse()`, the `.stream()` helpers and pagination are the SDK's; only `request()` is ours."""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any, TypeVar

import openai

from modelport.client.arguments import build_service
from modelport.client.dispatch import Dispatch, sdk_arguments
from modelport.client.realtime_pipes import LocalAsyncRealtime
from modelport.client.sdk_errors import sdk_errors
from modelport.client.streams import LocalAsyncStream
from modelport.protocol.sdk_private import AsyncStreamT, FinalRequestOptions
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
        super().__init__(**sdk_arguments(api_key, options, openai.DefaultAsyncHttpxClient))

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
        shaped = self._dispatch.shaped(self, answer, headers, options, cast_to, stream)
        if shaped.events is not None:
            return await LocalAsyncStream(shaped.events, shaped.path, self, cast_to).start()
        if shaped.response is None:
            return shaped.value
        with sdk_errors(shaped.path):
            return await self._process_response(
                cast_to=cast_to,
                options=options,
                response=shaped.response,
                stream=stream,
                stream_cls=stream_cls,
            )

    async def close(self) -> None:
        """Stop probing upstreams, running batches and close connections, if this client built its
        service."""
        if self._owns_service:
            await self.service.close()
        await super().close()
