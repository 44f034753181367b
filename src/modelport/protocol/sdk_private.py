"""Every private name of the `openai` package that modelport uses, in one place, so that an SDK release that
moves one breaks one import here and one test (`tests/protocol/test_sdk_private.py`), not a face.

Checked against openai 3.54 (the oldest `pyproject.toml` allows) to 3.57. Besides the names imported here,
the in-process client overrides or calls these members of the SDK's own classes, which the test checks too:
`OpenAI.request` / `AsyncOpenAI.request` (the one method the client replaces), `_process_response`,
`_process_response_data` and `_maybe_override_cast_to` on both clients, and `Stream.__stream__` /
`AsyncStream.__stream__` with the `_iterator`, `_client`, `_cast_to` and `_options` they read.
"""

from __future__ import annotations

from typing import Any

from openai._base_client import _AsyncStreamT as AsyncStreamT
from openai._base_client import _StreamT as StreamT
from openai._constants import RAW_RESPONSE_HEADER
from openai._models import FinalRequestOptions, construct_type
from openai._qs import Querystring
from openai._utils import is_given

__all__ = [
    "RAW_RESPONSE_HEADER",
    "AsyncStreamT",
    "FinalRequestOptions",
    "Querystring",
    "StreamT",
    "is_given",
    "loosely",
]


def loosely(type_: Any, value: object) -> Any:
    """`value` built as `type_` (a model, or one of the SDK's annotated unions of events) the way the SDK
    builds what a server sent: without validation, so a field the type does not expect (a null where it
    says float, a new event's field) is carried rather than refused."""
    return construct_type(type_=type_, value=value)
