"""The default engines keep to the CPUs their process is given (`taskset`, a container's cpuset): none
runs a thread of its own on a CPU outside them, where it would take another program's core (onnxruntime's
defaults bind a thread to each physical core, whatever the process may use). llama.cpp's own binding is
`tests/engines/test_llamacpp.py`'s."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.models,  # loads the default models, in a process of its own
    pytest.mark.whole_machine,  # a worker of the suite is given one CPU: this needs two
    pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU sets are Linux's"),
]

# Given one CPU, the default voice, listener and embedder each answer; then each thread's CPUs are written.
_ON_ONE_CPU = """
import json, os, sys
from pathlib import Path

os.sched_setaffinity(0, {int(sys.argv[1])})
import modelport
from modelport import settings

models = [
    settings.ModelConfig(id=settings.DEFAULT_SPEECH, engine="piper"),
    settings.ModelConfig(id=settings.DEFAULT_TRANSCRIPTION, engine="faster-whisper"),
    settings.ModelConfig(id=settings.DEFAULT_EMBEDDING, engine="onnx-embedding"),
]
given = settings.Settings(defaults=False, models=models, store={"url": "none"})
with modelport.OpenAI(settings=given) as client:
    speech = client.audio.speech.create(
        model="tts-1", voice="alloy", input="A sentence to say.", response_format="wav"
    )
    client.audio.transcriptions.create(model="whisper-1", file=("said.wav", speech.content))
    client.embeddings.create(model="text-embedding-3-small", input="a sentence")
    threads = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            threads[task.name] = sorted(os.sched_getaffinity(int(task.name)))
        except OSError:  # a thread that ended meanwhile
            pass
print(json.dumps(threads))
"""


def test_every_thread_of_the_default_audio_and_embedding_engines_stays_on_the_process_s_cpus() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs: one given, one to stay off")
    given = allowed[0]  # onnxruntime binds its threads from the second core on
    command = [sys.executable, "-c", _ON_ONE_CPU, str(given)]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    threads: dict[str, list[int]] = json.loads(ran.stdout.strip().splitlines()[-1])
    assert len(threads) > 1
    assert {name: cpus for name, cpus in threads.items() if cpus != [given]} == {}
