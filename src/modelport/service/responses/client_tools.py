"""The tools of a Responses turn that the client runs, as the model is offered them and as its calls come
back: `function` tools; `custom` tools, whose input is free text (held, where the tool gives a Lark or regex
grammar that a regex can say, to that grammar); the function and custom tools a `namespace` groups; and the
tools an `additional_tools` item or a client-run `tool_search`'s output adds to the turn. Each is a chat
function for the model (a custom tool takes one string, `input`; a namespaced tool is `namespace__name`),
and each chat call becomes the item of its kind: a `function_call` (with its `namespace`) or a
`custom_tool_call`; and the tools OpenAI defines that the client runs (`shell`, `apply_patch`,
`local_shell`: `defined_tools`), whose calls are items of their own types.

OpenAI's hosted tools that cannot run on this machine (`web_search`, …) are not offered when a request
merely lists them (agents such as Codex list them by default), and the log says why; a `tool_choice` that
forces one is a 400 naming it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from openai.types.responses import (
    CustomTool,
    FunctionShellTool,
    FunctionTool,
    NamespaceTool,
    ResponseCustomToolCall,
    ResponseFunctionToolCall,
    Tool,
    ToolChoiceAllowed,
    ToolChoiceApplyPatch,
    ToolChoiceCustom,
    ToolChoiceFunction,
    ToolChoiceShell,
)
from openai.types.responses.namespace_tool import ToolFunction
from openai.types.shared.custom_tool_input_format import Grammar, Text

from modelport import ids
from modelport.errors import InvalidRequestError
from modelport.protocol.response_request import ToolChoice, tool_of
from modelport.protocol.validation import json_value
from modelport.service.generation.lark_regex import to_regex
from modelport.service.generation.schema import regex_error
from modelport.service.responses.defined_tools import DEFINED, DefinedCall

log = logging.getLogger("modelport.service")

Status = Literal["in_progress", "completed", "incomplete"]
INPUT = "input"  # the one argument a custom tool's chat function takes
_SEPARATOR = "__"  # between a namespace and a tool's name, in the function name the model calls
_NAME = re.compile(r"[^a-zA-Z0-9_-]")

# OpenAI's hosted tools this server does not run, and why.
HOSTED = {
    "web_search": "searching the web needs a search engine this server does not have, and would send the "
    "conversation out of the machine",
    "code_interpreter": "running the code a model writes needs a sandbox this server does not provide",
    "computer_use": "driving a computer from screenshots needs a vision model trained for it and a machine "
    "to drive",
    "image_generation": "no image model is served here",
    "shell": "its commands run in a container of OpenAI's (a `shell` tool of a `local` environment, or none, "
    "is the client's to run)",
    "tool_search": "its deferred tools are found by OpenAI's own search",
    "programmatic_tool_calling": "the programs that call tools run in OpenAI's own sandbox",
}
HOSTED.update(
    web_search_preview=HOSTED["web_search"], web_search_2025_08_26=HOSTED["web_search"],
    web_search_preview_2025_03_11=HOSTED["web_search"], computer_use_preview=HOSTED["computer_use"],
    computer=HOSTED["computer_use"],
)  # fmt: skip


@dataclass(frozen=True)
class Offered:
    """What one chat function stands for: a client tool, by its name and namespace."""

    name: str
    namespace: str | None
    custom: bool
    pattern: str | None = None  # a custom tool's grammar, as the regex its input is held to
    defined: str | None = None  # one of `DEFINED`, by its type


@dataclass
class ClientTools:
    """The client-run tools of one turn: the chat tools that offer them, and what each function name the
    model may call stands for."""

    chat: list[dict[str, Any]] = field(default_factory=list)
    named: dict[str, Offered] = field(default_factory=dict)

    def choice(self, choice: ToolChoice) -> str | dict[str, Any]:
        """A Responses `tool_choice` as chat's; a 400 for one that forces a hosted tool this server does
        not run, or names a tool the request does not offer."""
        if isinstance(choice, str):
            return choice
        if isinstance(choice, ToolChoiceShell | ToolChoiceApplyPatch):
            if choice.type not in self.named:
                raise InvalidRequestError(
                    f"tool_choice forces `{choice.type}`, which is not among the tools.", param="tool_choice"
                )
            return {"type": "function", "function": {"name": choice.type}}
        if choice.type in HOSTED:
            raise InvalidRequestError(
                f"tool_choice forces `{choice.type}`, which this server does not run: {HOSTED[choice.type]}.",
                param="tool_choice",
            )
        if isinstance(choice, ToolChoiceAllowed):
            return choice.mode  # over the tools it allows (`offered`)
        if isinstance(choice, ToolChoiceFunction | ToolChoiceCustom):
            name = chat_name(choice.name, getattr(choice, "namespace", None))
            if name not in self.named:
                raise InvalidRequestError(
                    f"tool_choice names `{choice.name}`, which is not among the tools.", param="tool_choice"
                )
            return {"type": "function", "function": {"name": name}}
        raise InvalidRequestError(
            f"tool_choice of type `{choice.type}` is not supported; use none, auto, required or "
            '{"type": "function" or "custom", "name": ...}.',
            param="tool_choice",
        )

    def offered(self, choice: ToolChoice | None) -> list[dict[str, Any]]:
        """The chat tools the model is offered: every one, or those an `allowed_tools` choice names (a
        client keeps its whole list in `tools` and narrows what one turn may call; the others are not shown
        to the model that turn, so its prompt is not the one a turn with them would have)."""
        if not isinstance(choice, ToolChoiceAllowed):
            return self.chat
        named = set()
        for tool in choice.tools:
            name, namespace = tool.get("name"), tool.get("namespace")
            if tool.get("type") in ("function", "custom") and isinstance(name, str):
                named.add(chat_name(name, namespace if isinstance(namespace, str) else None))
            elif tool.get("type") in DEFINED:
                named.add(str(tool["type"]))
        return [tool for tool in self.chat if tool["function"]["name"] in named]

    def item(
        self, item_id: str, call: dict[str, Any], status: Status
    ) -> ResponseFunctionToolCall | ResponseCustomToolCall | DefinedCall:
        """The output item of a chat tool call (`{"id", "function": {"name", "arguments"}}`). A custom call's
        id takes OpenAI's `ctc_` prefix in place of `fc_`, a defined tool's its own (an id made so keeps it
        when made again)."""
        function = call.get("function") or {}
        name = function.get("name") or ""
        arguments = function.get("arguments") or ""
        call_id = call.get("id") or ids.new_id("call", "_")
        offered = self.named.get(name)
        if offered is not None and offered.defined is not None:
            defined = DEFINED[offered.defined]
            return defined.made(item_id.replace("fc_", defined.id_prefix, 1), call_id, arguments, status)
        if offered is not None and offered.custom:
            made = ResponseCustomToolCall(
                id=item_id.replace("fc_", "ctc_", 1), type="custom_tool_call", call_id=call_id,
                name=offered.name, input=custom_input(arguments, offered, status),
            )  # fmt: skip
            if offered.namespace is not None:
                made.namespace = offered.namespace
            return made
        made_call = ResponseFunctionToolCall(
            id=item_id, type="function_call", status=status, call_id=call_id,
            name=offered.name if offered is not None else name, arguments=arguments,
        )  # fmt: skip
        if offered is not None and offered.namespace is not None:
            made_call.namespace = offered.namespace
        return made_call


def chat_name(name: str, namespace: str | None) -> str:
    """The function name the model calls a client tool by."""
    full = f"{namespace}{_SEPARATOR}{name}" if namespace else name
    return _NAME.sub("_", full)[:64]


def client_tools(tools: list[Tool], added: list[tuple[str, Tool]], served: tuple[str, ...]) -> ClientTools:
    """The client-run tools among a request's `tools` and those its input `added`; the tool types in
    `served` are the server's own (left out here); a hosted tool this server cannot run is left out with a
    line in the log."""
    gathered = ClientTools()
    for where, tool in [*((f"tools[{i}]", t) for i, t in enumerate(tools)), *added]:
        if tool.type in served:
            continue
        environment = tool.environment if isinstance(tool, FunctionShellTool) else None
        if environment is not None and environment.type != "local":
            log.info("%s (`shell` in a container) is not offered: %s", where, HOSTED["shell"])
            continue
        if tool.type in DEFINED:
            if tool.type in gathered.named:
                raise InvalidRequestError(f"{where}: `{tool.type}` is offered twice.", param=f"{where}.type")
            gathered.named[tool.type] = Offered(tool.type, None, custom=False, defined=tool.type)
            gathered.chat.append(DEFINED[tool.type].function(tool.type))
        elif tool.type in HOSTED:
            log.info("%s (`%s`) is not offered to the model: %s", where, tool.type, HOSTED[tool.type])
        elif isinstance(tool, NamespaceTool):
            if not tool.name:
                raise InvalidRequestError(f"{where}.name is required.", param=f"{where}.name")
            for j, inner in enumerate(tool.tools):
                _add(gathered, inner, f"{where}.tools[{j}]", tool.name)
        elif isinstance(tool, FunctionTool | CustomTool):
            _add(gathered, tool, where, None)
        else:  # a kind of tool an `openai` release newer than this server's code knows
            raise InvalidRequestError(
                f"{where} is `{tool.type}`, a tool type this server does not know. It runs function, custom "
                "(and those in a namespace), shell, apply_patch, local_shell, file_search and mcp tools.",
                param=f"{where}.type",
            )
    return gathered


def added_tools(items: list[dict[str, Any]]) -> list[tuple[str, Tool]]:
    """The tools that this turn's input items add (`additional_tools`, a client-run `tool_search`'s output),
    each with where it is, checked as a request's `tools` are."""
    found = []
    for i, item in enumerate(items):
        if item.get("type") in ("additional_tools", "tool_search_output"):
            for j, given in enumerate(item.get("tools") or []):
                where = f"input[{i}].tools[{j}]"
                found.append((where, tool_of(given, where)))
    return found


def custom_input(arguments: str, offered: Offered, status: Status) -> str:
    """A custom call's input, from its chat function's arguments (text the model wrote outside them is
    taken as the input); a finished input its grammar refuses is logged (the decoder held it)."""
    try:
        given = json_value(arguments)
        text = str(given.get(INPUT, "")) if isinstance(given, dict) else arguments
    except ValueError:
        text = arguments
    if status == "completed" and offered.pattern is not None and not _matches(offered.pattern, text):
        log.warning("the input of a call of custom tool %s does not match its grammar", offered.name)
    return text


def _matches(pattern: str, text: str) -> bool:
    r"""Whether `text` is all `pattern` says, as far as Python's `re` reads the pattern (llguidance, which
    held the input to it, reads Rust's syntax: `\p{L}` and the like are not Python's)."""
    try:
        return re.fullmatch(pattern, text) is not None
    except re.error:
        return True


def _add(
    gathered: ClientTools, tool: FunctionTool | ToolFunction | CustomTool, where: str, namespace: str | None
) -> None:
    if not tool.name:
        raise InvalidRequestError(f"{where}.name is required.", param=f"{where}.name")
    called = chat_name(tool.name, namespace)
    if called in gathered.named:
        raise InvalidRequestError(
            f"{where}: a tool named `{tool.name}` is offered twice.", param=f"{where}.name"
        )
    if not isinstance(tool, CustomTool):
        gathered.named[called] = Offered(tool.name, namespace, custom=False)
        described = {"description": tool.description, "parameters": tool.parameters, "strict": tool.strict}
        function = {k: v for k, v in described.items() if v is not None}
        gathered.chat.append({"type": "function", "function": {"name": called, **function}})
        return
    pattern, told = _custom_format(tool.format, f"{where}.format")
    gathered.named[called] = Offered(tool.name, namespace, custom=True, pattern=pattern)
    text: dict[str, Any] = {"type": "string", "description": told}
    if pattern is not None:
        text["pattern"] = pattern
    parameters = {"type": "object", "properties": {INPUT: text}, "required": [INPUT]}
    gathered.chat.append(
        {
            "type": "function",
            "function": {"name": called, "description": tool.description or "", "parameters": parameters},
        }
    )


def _custom_format(given: Text | Grammar | None, where: str) -> tuple[str | None, str]:
    """A custom tool's input format: the regex its input is held to (None: free text), and how the model
    is told of it."""
    if not isinstance(given, Grammar):
        return None, "The tool's input, as free text."
    if not given.definition:
        raise InvalidRequestError(f"{where}.definition is empty.", param=f"{where}.definition")
    told = f"The tool's input, written in this {given.syntax} grammar:\n{given.definition}"
    pattern = f"^({given.definition})$" if given.syntax == "regex" else to_regex(given.definition)
    if pattern is None:
        log.info("%s: the grammar recurses or goes past what a regex says; its input is free text", where)
    elif error := regex_error(pattern):  # what llama.cpp would leave unconstrained, saying nothing
        raise InvalidRequestError(
            f"{where}.definition cannot be enforced: {error}", param=f"{where}.definition"
        )
    return pattern, told
