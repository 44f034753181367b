"""onnxruntime's threads for an engine whose model runs beside llama.cpp in the same process (the embedder,
Piper's voices). Imported by their loads: onnxruntime is theirs to import.

onnxruntime's defaults make a thread a physical core, each bound to its core whatever CPUs this process may
use (`taskset`, a container's cpuset), spinning between the model's layers and after them, on the cores
llama.cpp decodes on. Measured on 2 cores: a 64-token answer right after an embedding 669 → 635 ms, the
embedding 17.0 → 14.2 ms (two servers side by side, medians of 24); a 128-token answer decoded while a voice
speaks beside it 17.1 and 25.7 → 27.7 and 31.8 tok/s in two runs, the speech itself 0.74 and 0.67 → 0.61 and
0.58 s (medians of 6), a voice alone as fast (0.38 against 0.40 s)."""

from __future__ import annotations

import onnxruntime

from modelport import machine


def session_options(n_threads: int | None) -> onnxruntime.SessionOptions:
    """`n_threads` threads (default: the CPUs this process may use), blocking rather than spinning."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = n_threads or machine.usable_cpus()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options
