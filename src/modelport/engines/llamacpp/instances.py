"""The llama.cpp instances behind one GGUF model: the one that serves, and, when it speculates, a second
without speculation for the requests that ask for log-probabilities.

llama.cpp reports no log-probabilities for the tokens a draft supplied (its verification accepts them
without scoring the alternatives: `logprob` 0, no `top_logprobs`), and this build offers no per-request
switch. The second instance maps the same weights (on the CPU they are shared, not copied), has its own KV
cache of the same size and two slots, and starts on the first request that needs it.
"""

from __future__ import annotations

import threading
from typing import Any

from modelport.engines.llamacpp.chunk_stream import ChunkHandler
from modelport.engines.llamacpp.launch import SLOTS, start_server

PLAIN_SLOTS = 2


class Instances:
    """Which llama.cpp server, and which of its handlers, a request goes to."""

    def __init__(self, server: Any, options: dict[str, Any], speculating: bool) -> None:
        self.server = server
        self._chat: ChunkHandler = server.handle_chat_completions
        self._completion: ChunkHandler = server.handle_completions
        self._options = options
        self._speculating = speculating
        self._plain: Any = None
        self._starting = threading.Lock()

    def chat(self, request: dict[str, Any]) -> ChunkHandler:
        if self._exact(request):
            return self._plain_server().handle_chat_completions  # type: ignore[no-any-return]
        return self._chat

    def completion(self, request: dict[str, Any]) -> ChunkHandler:
        if self._exact(request):
            return self._plain_server().handle_completions  # type: ignore[no-any-return]
        return self._completion

    def _exact(self, request: dict[str, Any]) -> bool:
        """Whether the request wants log-probabilities from a model that speculates."""
        return self._speculating and request.get("logprobs") not in (None, False)

    def _plain_server(self) -> Any:
        with self._starting:
            if self._plain is None:
                slots = min(PLAIN_SLOTS, int(self._options.get("n_parallel", SLOTS)))
                plain = {**self._options, "speculative": "none", "draft": None, "n_parallel": slots}
                self._plain = start_server(**plain)
        return self._plain
