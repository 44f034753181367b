"""Codex CLI (`@openai/codex`, installed from npm where npm is) against `modelport serve`, as a user sets it
up: a custom provider on the Responses wire, `-m gpt-5` (OpenAI's name, reaching the default chat model).
Codex sends its whole request unchanged: its shell and other functions, a `namespace` of sub-agent tools,
hosted `web_search`, reasoning with `include: ["reasoning.encrypted_content"]` and `store: false`, its
`prompt_cache_key` and metadata; and takes back the stream, runs the call, and sends its output (with context
items of its own: outputs of no call) in the next request.

What the model says is its own affair, so a relay between Codex and the server decides the turn's shape, as a
user's `tool_choice` would: the first request must call the shell (`exec_command`), the next must answer in
a short JSON object, greedily; the call's command or program is held to one (`ls`). Everything else Codex
sends reaches the server as Codex wrote it. The model is SmolLM2's first four blocks with a training context
of 32k tokens (its GGUF re-packed), since Codex's requests pass its 8k: what is checked here is what Codex
and the server do with a turn, never the model's words, and such a model reads Codex's prompts seven times
as fast."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_clis import Relay, installed, relaying
from tests.support.families import FIRST_BLOCKS, repack
from tests.support.live import configured_server

pytestmark = pytest.mark.slow  # Codex from npm, a model of its own

CODEX_VERSION = "0.171.0"
CACHE = Path(os.environ.get("MODELPORT_CODEX_DIR", Path.home() / ".cache" / "modelport" / "codex"))
# Codex's own instructions are 20 KB: a short one keeps the tiny model's prompt short on 2 cores.
ANSWER = {
    "type": "json_schema",
    "name": "answer",
    "schema": {
        "type": "object",
        "properties": {"answer": {"type": "string", "maxLength": 60}},
        "required": ["answer"],
    },
}
INSTRUCTIONS = "You are a coding agent. Run shell commands with exec_command, then answer in one sentence."


def codex() -> Path:
    """Codex's command, from npm (once)."""
    return installed("@openai/codex", CODEX_VERSION, "codex", CACHE)


OUTPUTS = ("function_call_output", "custom_tool_call_output")


def shell(request: dict[str, Any]) -> dict[str, Any]:
    """The tool choice that calls Codex's shell: its `exec_command` function, or (in the code mode of its own
    default model, whose tools come in an `additional_tools` item) the JavaScript `exec` that reaches it."""
    if any(tool.get("name") == "exec_command" for tool in request.get("tools") or []):
        return {"type": "function", "name": "exec_command"}
    return {"type": "custom", "name": "exec", "namespace": "functions"}


# Codex's `exec` takes any JavaScript (`/[\s\S]+/`), which a tiny model writes without end: here it is held to
# one program by a regex grammar (as a user may give one), so the call the server decodes under it is known.
# Its description (13.4 KB: the API of the tools the JavaScript can reach, ~3,400 prompt tokens of the forced
# turn's ~5,500, half a minute of one CPU) is cut to a sentence, since the grammar writes the program anyway.
PROGRAM = "await tools.exec_command({cmd: 'ls'})"
EXEC: dict[str, Any] = {
    "description": "Runs JavaScript that calls the shell: `await tools.exec_command({cmd})`.",
    "format": {"type": "grammar", "syntax": "regex", "definition": re.escape(PROGRAM)},
}


# Codex's `exec_command` takes any command, which a model of SmolLM2's first blocks writes without end: here
# it is held to one (its schema narrowed, as a user may give one), as `exec`'s program is.
COMMAND = {"type": "object", "properties": {"cmd": {"type": "string", "enum": ["ls"]}}, "required": ["cmd"]}


def narrowed(tool: dict[str, Any]) -> dict[str, Any]:
    """Codex's tool, its `exec_command`'s command held to COMMAND."""
    return {**tool, "parameters": COMMAND} if tool.get("name") == "exec_command" else tool


def bounded(item: dict[str, Any]) -> dict[str, Any]:
    """An `additional_tools` item with its `exec` tool's grammar narrowed to PROGRAM (and described short)."""
    if item.get("type") != "additional_tools":
        return item
    narrowed = [
        {**space, "tools": [{**t, **EXEC} if t.get("name") == "exec" else t for t in space["tools"]]}
        if space.get("type") == "namespace" else space
        for space in item["tools"]
    ]  # fmt: skip
    return {**item, "tools": narrowed}


def shaped(given: dict[str, Any]) -> dict[str, Any]:
    """A Responses request of Codex's with the turn's shape set: the shell called, or, once its output came
    back, a short answer whose end the grammar decides; greedily."""
    answered = any(item.get("type") in OUTPUTS and item.get("call_id") for item in given["input"])
    onward = {**given, "temperature": 0}
    onward["tool_choice"] = "none" if answered else shell(given)
    if answered:
        onward["text"] = {**(given.get("text") or {}), "format": ANSWER}
    else:
        onward["input"] = [bounded(item) for item in given["input"]]
        onward["tools"] = [narrowed(tool) for tool in given.get("tools") or []]
    return onward


@pytest.fixture(scope="module")
def relayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Relay]]:
    folder = tmp_path_factory.mktemp("codex")
    model = repack("smollm2", folder, context_length=32768, layers=FIRST_BLOCKS)
    config = (
        f'[[models]]\nid = "smollm2-135m-instruct"\nengine = "llamacpp"\npath = "{model}"\nn_parallel = 1\n'
    )
    with configured_server(folder, config) as live, relaying(live.url, "/responses", shaped) as served:
        yield served


@pytest.mark.parametrize("model", [None, "gpt-5"], ids=["codex-default", "gpt-5"])
def test_codex_runs_a_turn_that_calls_its_shell_and_ends(
    relayed: tuple[str, Relay], tmp_path: Path, model: str | None
) -> None:
    url, relay = relayed
    relay.sent.clear()
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "instructions.md").write_text(INSTRUCTIONS)
    (home / "config.toml").write_text(
        'model_provider = "modelport"\n'
        f'model_instructions_file = "{home / "instructions.md"}"\n'
        "[model_providers.modelport]\n"
        f'name = "modelport"\nbase_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "MODELPORT_KEY"\n'
        "supports_websockets = false\n"
    )
    ran = subprocess.run(
        [str(codex()), "exec", "--json", "--skip-git-repo-check", *(["-m", model] if model else []),
         "List the files here."],
        cwd=work, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
        env={**os.environ, "CODEX_HOME": str(home), "MODELPORT_KEY": "unused"},
    )  # fmt: skip
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert set(relay.statuses) == {200}
    first = relay.sent[0]
    # What Codex sent, taken as it sent it.
    assert first["store"] is False
    assert first["include"] == ["reasoning.encrypted_content"]
    if model is None:  # Codex's own default: its tools in an `additional_tools` item, namespaced, custom ones
        added = [
            t for item in first["input"] if item.get("type") == "additional_tools" for t in item["tools"]
        ]
        inner = {t["type"] for space in added for t in space.get("tools", [])}
        assert {t["type"] for t in added} == {"namespace"}
        assert {"custom", "function"} <= inner
        assert first["text"]["verbosity"]
    else:
        assert first["model"] == model
        assert {"function", "namespace", "web_search"} <= {t["type"] for t in first["tools"]}
    # Its shell ran the call, its output went back, and the turn ended with the model's answer.
    done = [e["item"] for e in events if e["type"] == "item.completed"]
    outputs = [
        item for item in relay.sent[-1]["input"] if item.get("type") in OUTPUTS and item.get("call_id")
    ]
    assert outputs
    if model is None:
        assert outputs[0]["type"] == "custom_tool_call_output"  # Codex ran the JavaScript the grammar held
    else:
        commands = [item for item in done if item["type"] == "command_execution"]
        assert commands
        assert commands[0]["command"].endswith("ls")  # the call the grammar held, run by Codex's shell
    assert events[-1]["type"] == "turn.completed"
    assert [item for item in done if item["type"] == "agent_message"]
