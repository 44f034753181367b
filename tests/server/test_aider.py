"""aider (`aider-chat` from PyPI, in a virtual environment of its own: it pins openai 2 and numpy 1) against
`modelport serve`, as a user sets it up: `--model openai/NAME --openai-api-base URL`, through LiteLLM, its
answer streamed. It sends its own system prompt and the files it was given, takes back the stream, and
applies the edit it reads in it.

What the model says is its own affair, so a relay between aider and the server holds the answer to one edit
in aider's `whole` format (a regex, as a user may give one), greedily: aider must read that edit and write
the file. Everything else aider sends reaches the server as aider wrote it. The model is SmolLM2's first four
blocks: what is checked is what aider and the server do with a turn, never the model's words."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_clis import Relay, python_installed, relaying
from tests.support.families import FIRST_BLOCKS, repack
from tests.support.live import configured_server

pytestmark = pytest.mark.slow  # aider from PyPI, a model of its own

AIDER_VERSION = "0.86.2"
CACHE = Path(os.environ.get("MODELPORT_AIDER_DIR", Path.home() / ".cache" / "modelport" / "aider"))
# The edit, as aider's `whole` format writes one: the file's name, then its whole new text fenced.
EDIT = r"hello\.py\n```python\nprint\(42\)\n```\n"


def shaped(given: dict[str, Any]) -> dict[str, Any]:
    """A chat request of aider's, its answer held to EDIT, greedily."""
    return {**given, "guided_regex": EDIT, "temperature": 0}


@pytest.fixture(scope="module")
def relayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Relay]]:
    folder = tmp_path_factory.mktemp("aider")
    model = repack("smollm2", folder, layers=FIRST_BLOCKS)
    config = f'defaults = false\n[[models]]\nid = "coder"\nengine = "llamacpp"\npath = "{model}"\n'
    with configured_server(folder, config) as live, relaying(live.url, "/chat/completions", shaped) as served:
        yield served


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_aider_applies_the_edit_the_answer_holds(
    relayed: tuple[str, Relay], tmp_path: Path, streamed: bool
) -> None:
    url, relay = relayed
    relay.sent.clear()
    aider = python_installed("aider-chat", AIDER_VERSION, "aider", CACHE)
    (tmp_path / "hello.py").write_text('print("hello")\n')
    ran = subprocess.run(
        [str(aider), "--model", "openai/coder", "--openai-api-base", f"{url}/v1",
         "--openai-api-key", "unused", "--edit-format", "whole", "--message", "Make it print 42.",
         "--yes-always", "--no-git", "--no-auto-commits", "--no-check-update", "--no-analytics",
         "--no-show-model-warnings", "--no-pretty", *([] if streamed else ["--no-stream"]), "hello.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
        # LiteLLM reads its price list from GitHub at import unless told to read its own copy.
        env={**os.environ, "HOME": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert set(relay.statuses) == {200}
    (sent,) = relay.sent
    assert sent["model"] == "coder"
    assert bool(sent.get("stream")) is streamed
    assert sent["messages"][0]["role"] == "system"
    assert any('print("hello")' in str(message["content"]) for message in sent["messages"])  # its file
    assert (tmp_path / "hello.py").read_text() == "print(42)\n"  # the edit aider read, applied
