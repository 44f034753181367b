"""The in-process face: `OpenAI` and `AsyncOpenAI` with the SDK's methods, calling the service directly.

No HTTP is involved; results are the `openai` package's own types and errors are its own exception classes.
"""

from __future__ import annotations

from modelport.client.async_client import AsyncOpenAI
from modelport.client.sync_client import OpenAI

__all__ = ["AsyncOpenAI", "OpenAI"]
