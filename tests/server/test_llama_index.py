"""LlamaIndex (`llama-index-core` with its OpenAI-compatible LLM and embeddings, from PyPI, in a virtual
environment of its own: it pins openai 2) on modelport, over Chat Completions (`OpenAILike`) and the
Responses API (`OpenAIResponses`): text whole, streamed and awaited, an agent of its workflows that runs a
tool and answers with its result, a vector index over the server's embeddings queried for an answer, and an
object held to its pydantic model by the server's grammar. The models are tiny predictors that answer from
their input (and the default chat model for the object): what is checked is what LlamaIndex reads of each
answer, never a model's words. Its script is tests/python/llama_index_app.py."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_clis import python_environment
from tests.support.configs import tiny_models
from tests.support.faces import Faces, faces

pytestmark = pytest.mark.slow  # LlamaIndex from PyPI

REQUIREMENTS = [
    "llama-index-core==0.14.25",
    "llama-index-llms-openai-like==0.8.1",
    "llama-index-embeddings-openai-like==0.4.0",
]
CACHE = Path(os.environ.get("MODELPORT_LLAMA_INDEX_DIR", Path.home() / ".cache/modelport/llama-index"))
SCRIPT = Path(__file__).parent.parent / "python" / "llama_index_app.py"
KEY = "sk-llama-index"
APIS = ["chat", "responses"]


def run(served: Faces, key: str, cases: list[str], home: Path) -> dict[str, Any]:
    """Each case's outcome (`NAME:API`), from one run of the script."""
    python = python_environment("llama-index-0.14.25", REQUIREMENTS, CACHE) / "bin" / "python"
    done = subprocess.run(
        [str(python), str(SCRIPT), f"{served.url}/v1", key, *cases],
        capture_output=True, text=True, timeout=300, env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcomes


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The cases on tiny predictors, run once for the module."""
    folder = tmp_path_factory.mktemp("llama-index")
    models = tiny_models(
        str(folder / "state.db"), KEY, reverse="reverse_chat", tools="tool_chat", recall="recall_chat",
        embed="trigram_embed",
    )  # fmt: skip
    with faces(models, api_key=KEY) as served:
        yield run(served, KEY, [f"{case}:{api}" for case in ("text", "agent", "rag") for api in APIS], folder)


def outcome(outcomes: dict[str, Any], case: str) -> Any:
    got = outcomes[case]
    assert "error" not in got, got["error"]
    return got["ok"]


@pytest.mark.parametrize("api", APIS)
def test_text_comes_whole_streamed_and_awaited(tiny: dict[str, Any], api: str) -> None:
    got = outcome(tiny, f"text:{api}")
    assert set(got.values()) == {"three two one"}


@pytest.mark.parametrize("api", APIS)
def test_an_agent_runs_its_tool_and_answers_with_the_result(tiny: dict[str, Any], api: str) -> None:
    got = outcome(tiny, f"agent:{api}")
    assert got["asked"] == ["What is the answer?"]  # the call's arguments, as LlamaIndex read them
    assert got["answer"] == got["streamed"] == "forty-two"  # the model's answer once the result went back
    assert {"ToolCall", "ToolCallResult", "AgentStream", "AgentOutput", "StopEvent"} <= set(got["kinds"])


@pytest.mark.parametrize("api", APIS)
def test_an_index_over_the_server_s_embeddings_answers_from_the_passage_they_chose(
    tiny: dict[str, Any], api: str
) -> None:
    got = outcome(tiny, f"rag:{api}")
    assert got["sources"] == ["The vault opens door seven."]
    assert "The vault opens door seven." in got["answer"]  # the passage reached the model in its prompt


def test_an_object_is_held_to_its_pydantic_model(server: Faces, tmp_path: Path) -> None:
    outcomes = run(server, "unused", [f"structured:{api}" for api in APIS], tmp_path)
    for api in APIS:
        got = outcome(outcomes, f"structured:{api}")
        assert got["type"] == "Pet"
        assert set(got["pet"]) == {"name", "legs"}
        assert len(got["pet"]["name"]) <= 12
        assert 0 <= got["pet"]["legs"] <= 8
