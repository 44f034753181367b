"""The Responses API's `Response` as modelport sends it: openai's type, with its times in whole seconds."""

from __future__ import annotations

from openai.types.responses import Response


class ResponseObject(Response):
    """openai's `Response`, but for `created_at` and `completed_at`, which its type holds as floats and JSON
    then writes as `1764290000.0`: OpenAI sends whole seconds and the OpenResponses specification requires
    integers, and clients that read them as integers (Rust's `u64`, Go's `int64`) refuse a float."""

    created_at: int
    completed_at: int | None = None
