"""The tools OpenAI defines by type alone that the client runs: `shell` (commands run on the user's machine,
their output given back as `shell_call_output`), `apply_patch` (a file created, changed or deleted by a diff,
its outcome given back as `apply_patch_call_output`) and `local_shell` (one command as its argument list, the
older form). The OpenAI Agents SDK's `ShellTool` and `ApplyPatchTool` and the Vercel AI SDK's
`openai.tools.shell`/`applyPatch`/`localShell` offer them so. Each is a chat function with the tool's own
name and the arguments of its action, and each chat call becomes the call item of its type. A `shell` tool
whose environment is a container is OpenAI's to run (`client_tools.HOSTED`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from openai.types.responses import ResponseApplyPatchToolCall, ResponseFunctionShellToolCall
from openai.types.responses.response_output_item import LocalShellCall

from modelport.protocol.validation import json_value

Status = Literal["in_progress", "completed", "incomplete"]
DefinedCall = ResponseFunctionShellToolCall | ResponseApplyPatchToolCall | LocalShellCall

_COMMANDS = {"type": "array", "items": {"type": "string"}, "minItems": 1}
_TIMEOUT = {"type": "integer", "minimum": 1, "description": "How long the commands may run, in milliseconds."}
_PATCH_KINDS = ["create_file", "update_file", "delete_file"]


def _args(arguments: str) -> dict[str, Any]:
    """A call's arguments as the model wrote them (what cannot be read, as a cut call's: none)."""
    try:
        given = json_value(arguments or "{}")
    except ValueError:
        return {}
    return given if isinstance(given, dict) else {}


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)] if value else []


def _shell_call(item_id: str, call_id: str, arguments: str, status: Status) -> DefinedCall:
    given = _args(arguments)
    action: dict[str, Any] = {"commands": _strings(given.get("commands"))}
    if isinstance(given.get("timeout_ms"), int):
        action["timeout_ms"] = given["timeout_ms"]
    return ResponseFunctionShellToolCall.model_validate(
        {"id": item_id, "type": "shell_call", "call_id": call_id, "action": action, "status": status}
    )


def _patch_call(item_id: str, call_id: str, arguments: str, status: Status) -> DefinedCall:
    given = _args(arguments)
    kind = given.get("type") if given.get("type") in _PATCH_KINDS else "update_file"
    operation = {"type": kind, "path": str(given.get("path") or "")}
    if kind != "delete_file":
        operation["diff"] = str(given.get("diff") or "")
    return ResponseApplyPatchToolCall.model_validate(
        {
            "id": item_id, "type": "apply_patch_call", "call_id": call_id, "operation": operation,
            "status": "completed" if status == "completed" else "in_progress",  # its type has no other
        }
    )  # fmt: skip


def _local_shell_call(item_id: str, call_id: str, arguments: str, status: Status) -> DefinedCall:
    given = _args(arguments)
    env = given.get("env")
    action: dict[str, Any] = {
        "type": "exec",
        "command": _strings(given.get("command")),
        "env": {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
    }
    for name in ("timeout_ms", "working_directory"):
        if given.get(name) is not None:
            action[name] = given[name]
    return LocalShellCall.model_validate(
        {"id": item_id, "type": "local_shell_call", "call_id": call_id, "action": action, "status": status}
    )


def _shell_arguments(item: dict[str, Any]) -> dict[str, Any]:
    action = item.get("action") or {}
    kept = {"commands": action.get("commands") or []}
    return kept | ({"timeout_ms": action["timeout_ms"]} if action.get("timeout_ms") else {})


def _patch_arguments(item: dict[str, Any]) -> dict[str, Any]:
    return dict(item.get("operation") or {})


def _local_shell_arguments(item: dict[str, Any]) -> dict[str, Any]:
    action = item.get("action") or {}
    return {k: v for k, v in action.items() if k != "type" and v is not None}


def _shell_output(item: dict[str, Any]) -> str:
    said = []
    for ran in item.get("output") or []:
        outcome = ran.get("outcome") or {}
        ended = "timed out" if outcome.get("type") == "timeout" else f"exit code {outcome.get('exit_code')}"
        parts = [ended, ran.get("stdout") or ""]
        if ran.get("stderr"):
            parts.append(f"stderr:\n{ran['stderr']}")
        said.append("\n".join(part for part in parts if part))
    return "\n\n".join(said)


def _patch_output(item: dict[str, Any]) -> str:
    return "\n".join(filter(None, [str(item.get("status") or ""), item.get("output")]))


def _local_shell_output(item: dict[str, Any]) -> str:
    return str(item.get("output") or "")


@dataclass(frozen=True)
class Defined:
    """One defined tool: the chat function the model calls it by, the call item a chat call becomes, and
    how its call and output items (given back as input) read as chat's call and tool message."""

    description: str
    parameters: dict[str, Any]
    call_type: str
    output_type: str
    id_prefix: str
    made: Callable[[str, str, str, Status], DefinedCall]
    arguments: Callable[[dict[str, Any]], dict[str, Any]]  # of a call item, as the chat function takes them
    output: Callable[[dict[str, Any]], str]  # an output item, as the tool message says it

    def function(self, name: str) -> dict[str, Any]:
        """The chat tool that offers it."""
        described = {"name": name, "description": self.description, "parameters": self.parameters}
        return {"type": "function", "function": described}


DEFINED: dict[str, Defined] = {
    "shell": Defined(
        "Run shell commands on the user's machine, one after another; their output (stdout, stderr and exit "
        "code) comes back.",
        {
            "type": "object",
            "properties": {"commands": _COMMANDS, "timeout_ms": _TIMEOUT},
            "required": ["commands"],
        },
        "shell_call", "shell_call_output", "sh_", _shell_call, _shell_arguments, _shell_output,
    ),
    "apply_patch": Defined(
        "Create, change or delete one file of the user's. `diff` is in the V4A format: for "
        "create_file, every line of the new file prefixed with `+`; for update_file, hunks that start "
        "with `@@` and a line of context, then lines prefixed with ` ` (kept), `-` (removed) or `+` "
        "(added); empty for delete_file.",
        {
            "type": "object",
            "properties": {
                "type": {"enum": _PATCH_KINDS}, "path": {"type": "string"}, "diff": {"type": "string"},
            },
            "required": ["type", "path", "diff"],  # (clients refuse a create or update without one)
        },
        "apply_patch_call", "apply_patch_call_output", "apc_", _patch_call, _patch_arguments, _patch_output,
    ),
    "local_shell": Defined(
        "Run one command on the user's machine, as its argument list (`[\"ls\", \"-l\"]`); its output comes "
        "back.",
        {
            "type": "object",
            "properties": {
                "command": _COMMANDS, "working_directory": {"type": "string"}, "timeout_ms": _TIMEOUT,
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["command"],
        },
        "local_shell_call", "local_shell_call_output", "lsh_", _local_shell_call, _local_shell_arguments,
        _local_shell_output,
    ),
}  # fmt: skip
# A call or an output item given back, by its type: the tool it is of.
CALLS = {defined.call_type: name for name, defined in DEFINED.items()}
OUTPUTS = {defined.output_type: name for name, defined in DEFINED.items()}


def call_id_of_output(item: dict[str, Any]) -> Any:
    """The call an output item answers: a `local_shell_call_output` names it by its `id`."""
    return item.get("id") if item.get("type") == "local_shell_call_output" else item.get("call_id")
