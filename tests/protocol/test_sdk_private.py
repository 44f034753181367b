"""The `openai` package's private names modelport uses (`modelport.protocol.sdk_private`) still exist and
still do what modelport relies on, against the installed SDK: a release that moves one fails here, by
name, rather than somewhere inside a face."""

from __future__ import annotations

import inspect

import openai
from openai.types.chat import ChatCompletion
from openai.types.responses import ResponseStreamEvent

from modelport.protocol import sdk_private


def test_loosely_builds_what_validation_would_refuse() -> None:
    # A scored prompt's first token has null log-probabilities where the type says float.
    data = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [], "usage": None}
    built = sdk_private.loosely(ChatCompletion, {**data, "extra_field": 1.5})
    assert isinstance(built, ChatCompletion)
    assert built.id == "x"
    event = sdk_private.loosely(ResponseStreamEvent, {"type": "response.output_text.delta", "delta": "hi"})
    assert type(event).__name__ == "ResponseTextDeltaEvent"
    assert event.delta == "hi"


def test_request_options_have_the_fields_the_client_reads() -> None:
    options = sdk_private.FinalRequestOptions.construct(method="post", url="/chat/completions", json_data={})
    for field in ("method", "url", "params", "headers", "json_data", "files", "post_parser", "extra_json"):
        assert hasattr(options, field), field
    assert not sdk_private.is_given(options.post_parser)
    assert isinstance(sdk_private.RAW_RESPONSE_HEADER, str)
    query = sdk_private.Querystring(array_format="brackets").stringify({"include": ["a", "b"], "limit": 2})
    assert query == "include%5B%5D=a&include%5B%5D=b&limit=2"


def test_the_members_the_in_process_client_overrides_or_calls_are_there() -> None:
    for client in (openai.OpenAI, openai.AsyncOpenAI):
        for member in ("request", "_process_response", "_process_response_data", "_maybe_override_cast_to"):
            assert callable(getattr(client, member, None)), f"{client.__name__}.{member}"
        assert list(inspect.signature(client.request).parameters) == [
            "self", "cast_to", "options", "stream", "stream_cls"
        ]  # fmt: skip
    for stream in (openai.Stream, openai.AsyncStream):
        assert callable(getattr(stream, "__stream__", None)), stream.__name__
        source = inspect.getsource(stream.__init__)  # what it sets, which the local streams set too
        for attribute in ("_iterator", "_client", "_cast_to", "_options"):
            assert f"self.{attribute}" in source, f"{stream.__name__}.{attribute}"
    assert sdk_private.StreamT is not None
    assert sdk_private.AsyncStreamT is not None
