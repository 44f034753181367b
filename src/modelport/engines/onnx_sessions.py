"""ONNX Runtime sessions as modelport's engines open them: their threads block between runs rather than
spin waiting for the next. onnxruntime's pool spins by default, which pays on a machine given to it; here
the cores are shared with llama.cpp, and a pool spinning after an embedding or a spoken sentence took them
from the chat decoding next (a 64-token answer right after an embedding 556 → 513 ms, after a sentence
spoken 561 → 519 ms, on 2 cores; the embedding and the speech themselves alike)."""

from __future__ import annotations

from typing import Any


def session_options(threads: int | None = None) -> Any:
    """`onnxruntime.SessionOptions` with spinning off, and `threads` for its pool (default: onnxruntime's)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads is not None:
        options.intra_op_num_threads = threads
    return options
