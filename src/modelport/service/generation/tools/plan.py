"""The first step of tool calling, for every chat model whatever its template knows: the tools a request
offers and how the model must answer (`ToolPlan`), and the answer the decoder holds it to
(`response_format`: one JSON object a schema constrains, `{"content": "..."}` for a reply or
`{"tool_calls": [{"name": ..., "arguments": {...}}]}` where each `arguments` must validate against that
tool's parameters; `required` and a named tool drop the reply branch, so a call is guaranteed)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest
from modelport.service.generation.schema import enforced

_PREAMBLE = (
    "You can call these tools. Each line is one tool: its name, what it does, and the JSON schema of its "
    "arguments.\n{tools}\n\n{rule}"
)
_RULES = {
    "auto": 'Answer with one JSON object: {{"tool_calls": [{{"name": <tool name>, "arguments": <arguments '
    'object>}}]}} to call {count}, or {{"content": <your reply>}} to answer the user directly.',
    "required": 'You must call {count}. Answer with one JSON object: {{"tool_calls": [{{"name": <tool '
    'name>, "arguments": <arguments object>}}]}}.',
}


@dataclass(frozen=True)
class ToolPlan:
    """The tools a request offers, and how the model must answer."""

    tools: list[dict[str, Any]]  # each {"name", "description", "parameters"}
    required: bool
    parallel: bool
    legacy: bool  # `functions`: answer with `function_call`, not `tool_calls`

    def schema(self) -> dict[str, Any]:
        """The JSON schema the decoder enforces on the model's answer."""
        call, defs = self.call_schema()
        call_branch = _object({"tool_calls": self.array(call)})
        schema = (
            call_branch
            if self.required
            else {"anyOf": [_object({"content": {"type": "string"}}), call_branch]}
        )
        return {**schema, "$defs": defs} if defs else schema

    def call_schema(
        self, arguments: str = "arguments", name: str = "name", first: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The schema of one call, `{<name>: ..., <arguments>: ...}` after the properties `first` (Cohere's
        `tool_call_id`), and the `$defs` its `$ref`s need (to be placed at the root of the schema it goes
        into)."""
        defs: dict[str, Any] = {}
        calls = []
        for i, tool in enumerate(self.tools):
            parameters = _hoist_defs(tool.get("parameters") or {"type": "object"}, f"t{i}_", defs)
            properties = {**(first or {}), name: {"const": tool["name"]}, arguments: parameters}
            calls.append(
                {
                    "type": "object",
                    "properties": properties,
                    "required": list(properties),
                    "additionalProperties": False,
                }
            )
        return (calls[0] if len(calls) == 1 else {"anyOf": calls}), defs

    def array(self, call: dict[str, Any]) -> dict[str, Any]:
        """The schema of the list of calls: one at least, one at most unless calls may go in parallel."""
        array: dict[str, Any] = {"type": "array", "items": call, "minItems": 1}
        if not self.parallel:
            array["maxItems"] = 1
        return array

    def system_prompt(self) -> str:
        """The instructions that describe the tools and the answer format to the model."""
        lines = [json.dumps(t, ensure_ascii=False) for t in self.tools]
        count = "one tool" if not self.parallel else "one or more tools"
        if len(self.tools) == 1 and self.required:
            count = f"the tool `{self.tools[0]['name']}`"
        return _PREAMBLE.format(
            tools="\n".join(lines), rule=_RULES["required" if self.required else "auto"].format(count=count)
        )


def plan(request: ChatCompletionRequest) -> ToolPlan | None:
    """The tool plan of a request, or None when no tool may be called (no tools, or `tool_choice: none`)."""
    extras = request.extras()
    functions, function_call = extras.get("functions"), extras.get("function_call")
    legacy = request.tools is None and functions is not None
    if legacy:
        tools = [_function(f, f"functions[{i}]") for i, f in enumerate(_list(functions, "functions"))]
        choice: Any = function_call
        if isinstance(choice, dict):
            choice = {"type": "function", "function": choice}
    else:
        tools = [_tool(t, i) for i, t in enumerate(request.tools or [])]
        choice = request.tool_choice
    if not tools and choice not in (None, "none"):
        raise InvalidRequestError(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            param="tool_choice",
        )
    if not tools or choice == "none":
        return None
    names = [t["name"] for t in tools]
    if len(set(names)) != len(names):
        raise InvalidRequestError("Tool names must be unique.", param="tools")
    named = False
    if choice in (None, "auto"):
        required = False
    elif choice == "required":
        required = True
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        if name not in names:
            raise InvalidRequestError(
                f"tool_choice names `{name}`, which is not among the tools: {', '.join(names)}.",
                param="tool_choice",
            )
        tools, required, named = [t for t in tools if t["name"] == name], True, True
    else:
        raise InvalidRequestError(
            "tool_choice must be 'none', 'auto', 'required' or "
            "{'type': 'function', 'function': {'name': ...}}.",
            param="tool_choice",
        )
    for i, tool in enumerate(tools):
        where = f"tools[{i}].function.parameters"
        tool["parameters"] = enforced(tool.get("parameters") or {}, where, "tools")
    parallel = request.parallel_tool_calls is not False and not legacy and not named
    return ToolPlan(tools, required, parallel, legacy)


def response_format(plan: ToolPlan) -> dict[str, Any]:
    """The `response_format` that makes the decoder enforce the plan."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "tool_answer", "strict": True, "schema": plan.schema()},
    }


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _hoist_defs(schema: dict[str, Any], prefix: str, defs: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameters moved under the answer schema: its local `$ref`s keep pointing at its own defs."""
    own = {**(schema.get("$defs") or {}), **(schema.get("definitions") or {})}
    body = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: rewrite(v) for k, v in node.items()}
            ref = out.get("$ref")
            if isinstance(ref, str):
                if ref == "#":
                    out["$ref"] = f"#/$defs/{prefix}root"
                    defs[f"{prefix}root"] = rewrite(body)
                for local in ("#/$defs/", "#/definitions/"):
                    if ref.startswith(local):
                        out["$ref"] = f"#/$defs/{prefix}{ref[len(local) :]}"
            return out
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    for name, definition in own.items():
        defs[f"{prefix}{name}"] = rewrite(definition)
    return rewrite(body)  # type: ignore[no-any-return]


def _list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidRequestError(f"`{param}` must be a list.", param=param)
    return value


def _tool(tool: Any, i: int) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        raise InvalidRequestError(f"tools[{i}]: only function tools are supported.", param=f"tools[{i}]")
    return _function(tool.get("function"), f"tools[{i}].function")


def _function(function: Any, where: str) -> dict[str, Any]:
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidRequestError(f"{where} needs a `name`.", param=where)
    if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", function["name"]):
        raise InvalidRequestError(
            f"{where}.name must be 1–64 letters, digits, underscores or dashes.", param=where
        )
    parameters = function.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise InvalidRequestError(f"{where}.parameters must be a JSON schema object.", param=where)
    described = {"name": function["name"], "description": function.get("description", "")}
    return {**described, "parameters": parameters or {"type": "object", "properties": {}}}
