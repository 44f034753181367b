"""Claude Code (`@anthropic-ai/claude-code`, installed from npm where npm is) against `modelport serve`, as a
user scripting it points it at a local model: `ANTHROPIC_BASE_URL` at the server, a key in
`ANTHROPIC_API_KEY`, non-interactive (`claude -p`) in its minimal mode (`--bare`: no CLAUDE.md, skills
listing or hooks, only an API key), telemetry and other traffic off, a short system prompt of the user's
(`--system-prompt`; Claude Code's own is 28 KB). Claude Code sends its whole Messages request unchanged:
its system prompt in blocks with `cache_control`, its tools (Bash, Read, Edit) with their schemas,
`metadata`, `thinking`, `context_management`, streaming.

What the model says is its own affair, so a relay between Claude Code and the server decides the turn's
shape, as a user's `tool_choice` would: the first request of the turn must call `Bash`, the next (with the
tool's result) must answer in text, greedily and briefly. Everything else reaches the server as Claude Code
wrote it. Outside `--bare`, Claude Code's first message carries ~11 KB of reminders (its skills, its agents)
and its Bash tool a 10-KB description: 5,500 prompt tokens, 30 s of a 2-core machine's prompt processing
for what this test checks of the server. The model is SmolLM2's first four blocks (re-packed): the relay's
grammars decide every word checked here, and such a model reads a prompt seven times as fast."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_clis import Relay, installed, relaying
from tests.support.families import FIRST_BLOCKS, repack
from tests.support.live import configured_server

pytestmark = pytest.mark.slow  # Claude Code from npm, a server of its own

CLAUDE_VERSION = "2.1.332"
CACHE = Path(os.environ.get("MODELPORT_CLAUDE_DIR", Path.home() / ".cache" / "modelport" / "claude-code"))
# Claude Code's own system prompt is 28 KB (7k tokens; its first request took 230 s on 2 cores): a short one,
# as a user gives it (`--system-prompt`), keeps the tiny model's prompt short; its blocks are sent as ever.
SYSTEM_PROMPT = "You are a coding agent. Run shell commands with Bash, then answer in one sentence."
# A command the grammar holds the call to, so what ran is known.
COMMAND = {"type": "object", "properties": {"command": {"const": "ls"}}, "required": ["command"]}
# The answer after the call: short JSON, whose end the grammar decides (an answer cut by `max_tokens` is one
# Claude Code asks to be continued).
ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 60}},
    "required": ["answer"],
}


def claude() -> Path:
    """Claude Code's command, from npm (once)."""
    return installed("@anthropic-ai/claude-code", CLAUDE_VERSION, "claude", CACHE)


def answered(request: dict[str, Any]) -> bool:
    """Whether the turns after the assistant's last one carry a tool's result."""
    after: list[dict[str, Any]] = []
    for message in reversed(request["messages"]):
        if message["role"] == "assistant":
            break
        after.append(message)
    blocks = [b for m in after if isinstance(m["content"], list) for b in m["content"]]
    return any(block.get("type") == "tool_result" for block in blocks)


def shaped(given: dict[str, Any]) -> dict[str, Any]:
    """A Messages request of Claude Code's with the turn's shape set: Bash called, or, once its result came
    back (or for Claude Code's own small requests: a title, a topic), a short answer; greedily."""
    onward = {**given, "temperature": 0}
    tools = {tool.get("name") for tool in given.get("tools") or []}
    if answered(given):
        onward["tool_choice"] = {"type": "none"}
        onward["output_config"] = {"format": {"type": "json_schema", "schema": ANSWER}}
    elif "Bash" in tools:
        onward["tool_choice"] = {"type": "tool", "name": "Bash"}
        onward["tools"] = [
            {**tool, "input_schema": COMMAND} if tool.get("name") == "Bash" else tool
            for tool in given["tools"]
        ]
    else:
        onward["output_config"] = {"format": {"type": "json_schema", "schema": ANSWER}}
    return onward


@pytest.fixture(scope="module")
def relayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Relay]]:
    folder = tmp_path_factory.mktemp("claude-code")
    config = 'defaults = false\n[[models]]\nid = "smollm2-135m-instruct"\nengine = "llamacpp"\n'
    config += f'path = "{repack("smollm2", folder, layers=FIRST_BLOCKS)}"\nn_parallel = 1\n'
    with configured_server(folder, config) as live, relaying(live.url, "/messages", shaped) as served:
        yield served


def test_claude_code_runs_a_turn_that_calls_its_shell_and_ends(
    relayed: tuple[str, Relay], tmp_path: Path
) -> None:
    url, relay = relayed
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "notes.txt").write_text("a file for ls to find\n")
    quiet = {
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    ran = subprocess.run(
        [str(claude()), "-p", "List the files here.", "--output-format", "stream-json", "--verbose",
         "--allowedTools", "Bash(ls)", "--model", "claude-sonnet-4-6", "--max-turns", "2",
         "--system-prompt", SYSTEM_PROMPT, "--bare"],
        cwd=work, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
        env={"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": url,
             "ANTHROPIC_API_KEY": "unused", **quiet},
    )  # fmt: skip
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert set(relay.statuses) == {200}, relay.statuses
    turn = [
        request for request in relay.sent if "Bash" in {t.get("name") for t in request.get("tools") or []}
    ]
    first = turn[0]
    # What Claude Code sent, taken as it sent it: its system prompt in blocks, its tools, streaming.
    assert isinstance(first["system"], list)
    assert any(block.get("cache_control") for block in first["system"])
    assert SYSTEM_PROMPT in json.dumps(first["system"])
    assert first["stream"] is True
    assert {"Bash", "Read", "Edit"} <= {tool["name"] for tool in first["tools"]}
    # Its shell ran the call, the result went back, and the turn ended with the model's answer.
    results = [block for block in turn[-1]["messages"][-1]["content"] if block.get("type") == "tool_result"]
    assert results
    assert "notes.txt" in json.dumps(results)  # `ls` ran in the work folder
    final = events[-1]
    assert final["type"] == "result"
    assert final["subtype"] == "success"
