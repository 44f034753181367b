"""The llama.cpp instances behind one GGUF model: the one that serves, and, when it speculates, a second
without speculation for the requests that ask for log-probabilities.

llama.cpp reports no log-probabilities for the tokens a draft supplied (its verification accepts them
without scoring the alternatives: `logprob` 0, no `top_logprobs`), and this build offers no per-request
switch. The second instance maps the same weights (on the CPU they are shared, not copied), has its own KV
cache of the same size and two slots, and starts on the first request that needs it.

What the drafts of a speculating instance paid (tokens drafted, and accepted) is counted in the metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelport import metrics
from modelport.engines.llamacpp.chunk_stream import ChunkHandler
from modelport.engines.llamacpp.launch import SLOTS, speculates, start_server

PLAIN_SLOTS = 2


class Instances:
    """Which llama.cpp server a request goes to."""

    def __init__(self, server: Any, options: dict[str, Any], gguf: Path) -> None:
        self.server = server
        self._options = options
        self._speculating = speculates(options)
        self._plain: Any = None
        self._starting = threading.Lock()
        self._drafted = metrics.DRAFTED.labels(gguf.name)
        self._accepted = metrics.DRAFTS_ACCEPTED.labels(gguf.name)

    def chat(self, request: dict[str, Any]) -> ChunkHandler:
        return self._counted(self._for(request).handle_chat_completions)

    def completion(self, request: dict[str, Any]) -> ChunkHandler:
        return self._counted(self._for(request).handle_completions)

    def main(self, request: dict[str, Any]) -> bool:
        """Whether the serving instance takes this request."""
        return self._for(request) is self.server

    def _for(self, request: dict[str, Any]) -> Any:
        """The serving instance, or for a request that wants log-probabilities from a model that
        speculates, the one without speculation (a single token, as beam search asks, is never drafted)."""
        drafted = self._speculating and request.get("max_tokens") != 1
        if not drafted or request.get("logprobs") in (None, False):
            return self.server
        with self._starting:
            if self._plain is None:
                slots = min(PLAIN_SLOTS, int(self._options.get("n_parallel", SLOTS)))
                self._plain = start_server(
                    **{**self._options, "speculative": "none", "draft": None, "n_parallel": slots}
                )
        return self._plain

    def _counted(self, handle: ChunkHandler) -> ChunkHandler:
        """`handle`, counting the drafts its request's chunks report (llama.cpp's `timings`: the request's
        totals so far, on its last chunk, or on every chunk where the request asks for them per token)."""
        if not self._speculating:
            return handle

        def counted(request: dict[str, Any], callback: Callable[[dict[str, Any]], bool]) -> Any:
            told = [0, 0]  # drafted and accepted, as far as counted

            def on_chunk(chunk: dict[str, Any]) -> bool:
                timings = chunk.get("timings")
                if timings and timings.get("draft_n"):
                    drafted, accepted = int(timings["draft_n"]), int(timings.get("draft_n_accepted", 0))
                    self._drafted.inc(max(0, drafted - told[0]))
                    self._accepted.inc(max(0, accepted - told[1]))
                    told[:] = max(drafted, told[0]), max(accepted, told[1])
                return callback(chunk)

            return handle(request, on_chunk)

        return counted
