"""The Vercel AI SDK (npm's `ai` with `@ai-sdk/openai`) on modelport, over the Responses API (its provider's
default) and Chat Completions: text whole and streamed, a tool the SDK runs and the step that answers with
its result (tiny predictors that answer from their input), and an object held to its zod schema by the
server's grammar (the default chat model). The SDK parses every answer and event with its own schemas, so a
shape it does not expect is its error here. Its script is tests/node/ai_sdk.mjs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_clis import node_packages
from tests.support.configs import tiny_models
from tests.support.faces import Faces, faces

pytestmark = pytest.mark.slow  # Node.js and the SDK from npm

PACKAGES = {"ai": "6.0.326", "@ai-sdk/openai": "3.0.141", "zod": "4.6.7"}
CACHE = Path(os.environ.get("MODELPORT_AI_SDK_DIR", Path.home() / ".cache" / "modelport" / "ai-sdk"))
SCRIPT = Path(__file__).parent.parent / "node" / "ai_sdk.mjs"
KEY = "sk-ai-sdk"


@pytest.fixture(scope="module")
def sdk() -> Path:
    """The script beside the SDK's packages, where Node.js finds them."""
    folder = node_packages(PACKAGES, CACHE)
    shutil.copy(SCRIPT, folder / SCRIPT.name)
    return folder / SCRIPT.name


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    database = str(tmp_path_factory.mktemp("ai-sdk") / "state.db")
    models = tiny_models(
        database,
        KEY,
        reverse="reverse_chat",
        tools="tool_chat",
        recall="recall_chat",
        caller="schema_tool_chat",
    )
    with faces(models, api_key=KEY) as served:
        yield served


def run(sdk: Path, served: Faces, api: str, case: str, model: str, key: str = KEY) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None  # npm installed the packages
    done = subprocess.run(
        [node, str(sdk), f"{served.url}/v1", key, api, case, model],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in outcome, outcome
    return outcome["ok"]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_text_comes_whole_and_streamed(sdk: Path, tiny: Faces, api: str) -> None:
    got = run(sdk, tiny, api, "text", "reverse")
    assert got["whole"] == got["streamed"] == "three two one"
    assert got["finish"] == "stop"
    assert got["usage"] == 3


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_tool_the_sdk_runs_and_the_step_that_answers_with_its_result(
    sdk: Path, tiny: Faces, api: str
) -> None:
    got = run(sdk, tiny, api, "tools", "tools")
    assert got["asked"] == ["What is the answer?", "What is the answer?"]  # once whole, once streamed
    assert got["text"] == got["streamedText"] == "forty-two"
    assert got["steps"] == 2
    assert {"tool-input-start", "tool-input-delta", "tool-call", "tool-result", "text-delta"} <= set(
        got["kinds"]
    )


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_chat_s_history_goes_back_as_the_sdk_keeps_it(sdk: Path, tiny: Faces, api: str) -> None:
    """On the Responses API the SDK gives its earlier answer back as an `item_reference` (responses are
    stored): the model (one that answers with the conversation) is given the answer itself."""
    got = run(sdk, tiny, api, "history", "recall")
    assert got["first"] == "user: one two three"
    assert got["second"] == "user: one two three / assistant: user: one two three / user: four five"
    if api == "responses":
        assert got["types"] == ["user", "item_reference", "user"]


def test_the_provider_s_shell_tool_runs_on_the_calls_the_model_made(sdk: Path, tiny: Faces) -> None:
    got = run(sdk, tiny, "responses", "shell", "caller")
    assert got["ran"] == [["ls -l"]]
    assert got["text"] == "exit code 0\na.txt"  # the output the SDK gave back, as the model read it
    assert got["types"] == ["user", "item_reference", "shell_call_output"]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_object_is_held_to_its_schema(sdk: Path, server: Faces, api: str) -> None:
    got = run(sdk, server, api, "object", "smollm2-135m-instruct", key="unused")
    assert set(got["object"]) == {"name", "country"}
