"""Anthropic-defined tools. A client declares Anthropic's bash, text editor and memory tools by a dated `type`
and a fixed name, with no schema: Claude was trained on their inputs, and the client runs them. A local model
was not, so each is served as a function tool with the input schema and a description of the commands that
Anthropic's documentation gives it. Anthropic's server tools (web search and fetch, code execution, tool
search, the computer and browser toolsets) run on Anthropic's machines: one a request merely lists is not
offered to the model (the log says why), as OpenAI's hosted tools are not on the OpenAI face."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from modelport.errors import InvalidRequestError

log = logging.getLogger(__name__)

_PATH = {"type": "string", "description": "Absolute path to the file or directory."}
_LINES = {
    "type": "array",
    "items": {"type": "integer"},
    "minItems": 2,
    "maxItems": 2,
    "description": "`view` of a file: the first and last line to show, counting from 1 (-1 for the end).",
}


def _editor(commands: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": commands},
            "path": _PATH,
            "file_text": {"type": "string", "description": "`create`: the new file's content."},
            "old_str": {
                "type": "string",
                "description": "`str_replace`: text found exactly once in the file.",
            },
            "new_str": {
                "type": "string",
                "description": "`str_replace`: what replaces `old_str`; `insert`: the text to insert.",
            },
            "insert_line": {
                "type": "integer",
                "description": "`insert`: the line after which to insert (0: first).",
            },
            "view_range": _LINES,
        },
        "required": ["command", "path"],
    }


_EDITOR_TEXT = (
    "View, create and edit text files. `view` shows a file with line numbers (or lists a directory), "
    "`create` writes a new file, `str_replace` replaces `old_str`, which must occur exactly once, with "
    "`new_str`, and `insert` adds `new_str` after line `insert_line`."
)


@dataclass(frozen=True)
class DefinedTool:
    """One of Anthropic's client tools: the name a request must give it, its input schema and description."""

    name: str
    schema: dict[str, Any]
    description: str


_BASH = DefinedTool(
    "bash",
    {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command to run."},
            "restart": {"type": "boolean", "description": "Restart the shell session instead of running."},
        },
    },
    "Run a command in a persistent bash session, and read its output.",
)
_EDITOR = DefinedTool(
    "str_replace_based_edit_tool", _editor(["view", "create", "str_replace", "insert"]), _EDITOR_TEXT
)
_OLD_EDITOR = DefinedTool(
    "str_replace_editor",
    _editor(["view", "create", "str_replace", "insert", "undo_edit"]),
    _EDITOR_TEXT + " `undo_edit` reverts the last edit of the file at `path`.",
)
_MEMORY = DefinedTool(
    "memory",
    {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "enum": ["view", "create", "str_replace", "insert", "delete", "rename"],
            },
            "path": _PATH,
            "file_text": {"type": "string", "description": "`create`: the file's content."},
            "old_str": {
                "type": "string",
                "description": "`str_replace`: text found exactly once in the file.",
            },
            "new_str": {"type": "string", "description": "`str_replace`: the text that replaces `old_str`."},
            "insert_line": {"type": "integer", "description": "`insert`: the line at which to insert."},
            "insert_text": {"type": "string", "description": "`insert`: the text to insert."},
            "old_path": {"type": "string", "description": "`rename`: the file or directory to rename."},
            "new_path": {"type": "string", "description": "`rename`: its new path."},
            "view_range": _LINES,
        },
        "required": ["command"],
    },
    "Keep notes across conversations in a /memories directory: view it or a file, create, edit, insert "
    "into, delete and rename files. Look at what is there before starting a task.",
)

DEFINED = {
    "bash_20241022": _BASH,
    "bash_20250124": _BASH,
    "text_editor_20241022": _OLD_EDITOR,
    "text_editor_20250124": _OLD_EDITOR,
    "text_editor_20250429": _EDITOR,
    "text_editor_20250728": _EDITOR,
    "memory_20250818": _MEMORY,
}
_SERVER_TOOLS = (
    "web_search_",
    "web_fetch_",
    "code_execution_",
    "tool_search_",
    "computer_",
    "browser_",
    "mcp_",
)


def function(
    kind: str | None, name: str | None, description: str | None, schema: Any, where: str
) -> dict[str, Any] | None:
    """The chat function tool a Messages tool stands for (`where` names it in a 400); None for a server tool
    of Anthropic's, which is not offered."""
    if kind in (None, "custom"):
        if not name:
            raise InvalidRequestError(f"Missing required parameter: '{where}.name'.", param=f"{where}.name")
        if not isinstance(schema, dict):
            raise InvalidRequestError(
                f"Missing required parameter: '{where}.input_schema'.", param=f"{where}.input_schema"
            )
        return {"name": name, **({"description": description} if description else {}), "parameters": schema}
    if kind.startswith(_SERVER_TOOLS):
        log.info("%s (`%s`) is not offered to the model: it runs on Anthropic's machines", where, kind)
        return None
    defined = DEFINED.get(kind)
    if defined is None:
        served = ", ".join(["custom", *DEFINED])
        raise InvalidRequestError(
            f"`{kind}` is not a tool type this server knows; it serves {served}.", param=f"{where}.type"
        )
    if name != defined.name:
        raise InvalidRequestError(
            f"A `{kind}` tool is named `{defined.name}`, not `{name}`.", param=f"{where}.name"
        )
    return {
        "name": defined.name,
        "description": description or defined.description,
        "parameters": defined.schema,
    }
