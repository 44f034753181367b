"""Tool calling for every chat model, whatever its template knows: described in the prompt, enforced by
the decoder, parsed back into OpenAI's `tool_calls` as the text streams.

The model answers with one JSON object that a schema constrains: `{"content": "..."}` for a reply, or
`{"tool_calls": [{"name": ..., "arguments": {...}}]}` where each `arguments` must validate against that
tool's parameters. `required` and a named tool drop the reply branch, so a call is guaranteed.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest
from modelport.service.schema import check_enforceable

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

    def call_schema(self, arguments: str = "arguments") -> tuple[dict[str, Any], dict[str, Any]]:
        """The schema of one call, `{"name": ..., <arguments>: ...}`, and the `$defs` its `$ref`s need
        (to be placed at the root of the schema it goes into)."""
        defs: dict[str, Any] = {}
        calls = []
        for i, tool in enumerate(self.tools):
            parameters = _hoist_defs(tool.get("parameters") or {"type": "object"}, f"t{i}_", defs)
            calls.append(
                {
                    "type": "object",
                    "properties": {"name": {"const": tool["name"]}, arguments: parameters},
                    "required": ["name", arguments],
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
        check_enforceable(tool.get("parameters") or {}, f"tools[{i}].function.parameters", "tools")
    parallel = request.parallel_tool_calls is not False and not legacy and not named
    return ToolPlan(tools, required, parallel, legacy)


def render_history(
    messages: list[dict[str, Any]], plan: ToolPlan | None, native: bool = False
) -> list[dict[str, Any]]:
    """Messages any chat template can render: `developer` becomes `system`, neighbouring text messages of
    one role merge (for templates that demand strict alternation), and unless the template renders tools
    itself (`native`), tool calls and results become text in the answer format the model is asked for."""
    names: dict[str, str] = {}
    rendered: list[dict[str, Any]] = []
    for original in messages:
        message = dict(original)
        role = message["role"] = "system" if message["role"] == "developer" else message["role"]
        if native:
            pass  # the template renders tool calls and results itself
        elif role == "assistant" and (message.get("tool_calls") or message.get("function_call")):
            calls = message.pop("tool_calls", None) or [{"function": message.pop("function_call")}]
            for call in calls:
                if call.get("id"):
                    names[call["id"]] = call["function"]["name"]
            message["content"] = "\n".join(filter(None, [_text(message.get("content")), _calls_text(calls)]))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            name = names.get(call_id or "", "a tool")
            message = {
                "role": "user",
                "content": f"Result of {name} (call {call_id}):\n{_text(message.get('content'))}",
            }
        elif role == "function":
            name = message.get("name", "a function")
            message = {"role": "user", "content": f"Result of {name}:\n{_text(message.get('content'))}"}
        if rendered and rendered[-1]["role"] == message["role"] and _plain(message) and _plain(rendered[-1]):
            previous = rendered[-1]
            previous["content"] = f"{_text(previous.get('content'))}\n\n{_text(message.get('content'))}"
        else:
            rendered.append(message)
    if plan is not None and not native:
        if rendered and rendered[0]["role"] == "system":
            rendered[0]["content"] = f"{_text(rendered[0].get('content'))}\n\n{plan.system_prompt()}"
        else:
            rendered.insert(0, {"role": "system", "content": plan.system_prompt()})
    return rendered


def response_format(plan: ToolPlan) -> dict[str, Any]:
    """The `response_format` that makes the decoder enforce the plan."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "tool_answer", "strict": True, "schema": plan.schema()},
    }


class Parser(Protocol):
    """Reads a model's answer as it streams: `feed` returns the deltas its text completes."""

    @property
    def calls(self) -> int:
        """How many calls the answer has begun so far."""
        ...

    def feed(self, text: str) -> list[dict[str, Any]]: ...

    def flush(self, cut: bool) -> list[dict[str, Any]]:
        """The deltas of text kept back, once the answer has ended (`cut`: by `max_tokens`)."""
        ...


async def parse_stream(
    chunks: AsyncGenerator[dict[str, Any], None],
    plan: ToolPlan,
    new_parser: Callable[[], Parser] | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """Rewrite chunks whose content is the answer (our JSON format unless `new_parser` reads another)
    into content and tool-call deltas as OpenAI streams them; the last chunk of a choice that called a
    tool finishes with `tool_calls`."""
    new_parser = new_parser or (lambda: AnswerParser(plan.legacy))
    parsers: dict[int, Parser] = {}
    try:
        async for chunk in chunks:
            for choice in chunk.get("choices") or []:
                index = choice.get("index", 0)
                if index not in parsers:
                    parsers[index] = new_parser()
                parser = parsers[index]
                delta = choice.get("delta") or {}
                pieces = parser.feed(delta.pop("content", None) or "")
                if choice.get("finish_reason"):
                    pieces += parser.flush(choice["finish_reason"] == "length")
                if pieces:
                    delta.update(_merge_deltas(pieces))
                if delta.get("role") and "content" not in delta and "tool_calls" not in delta:
                    delta["content"] = None
                choice["delta"] = delta
                if choice.get("finish_reason") == "stop" and parser.calls:
                    choice["finish_reason"] = "function_call" if plan.legacy else "tool_calls"
            # Tokens of the JSON framing carry no text of their own: drop the chunks they leave empty.
            choices = [
                c
                for c in chunk.get("choices") or []
                if c["delta"] or c.get("finish_reason") or c.get("logprobs")
            ]
            if choices or chunk.get("usage") or not chunk.get("choices"):
                yield {**chunk, "choices": choices}
    finally:
        await chunks.aclose()


def _merge_deltas(pieces: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for piece in pieces:
        if "content" in piece:
            merged["content"] = merged.get("content", "") + piece["content"]
        for call in piece.get("tool_calls", []):
            merged.setdefault("tool_calls", []).append(call)
        if "function_call" in piece:
            previous = merged.setdefault("function_call", {})
            for key, value in piece["function_call"].items():
                previous[key] = previous.get(key, "") + value
    if "tool_calls" in merged:  # one delta per call index, arguments joined
        by_index: dict[int, dict[str, Any]] = {}
        for call in merged["tool_calls"]:
            known = by_index.get(call["index"])
            if known is None:
                by_index[call["index"]] = json.loads(json.dumps(call))
            else:
                known["function"]["arguments"] += call["function"]["arguments"]
        merged["tool_calls"] = list(by_index.values())
    return merged


_OPEN = re.compile(r'\s*\{\s*"(content|tool_calls)"\s*:\s*(\[)?\s*')
# A call inside the list: `arguments` in our format, Hermes' and Mistral's; `parameters` in Llama 3's.
_CALL_START = re.compile(
    r'\s*[\[,]?\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"(?:arguments|parameters)"\s*:\s*'
)
_CALL_END = re.compile(r"\s*\}")
_CALL_NAME = re.compile(r'\s*[\[,]?\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)')  # its name as far as it goes


@dataclass
class AnswerParser:
    """Incremental reader of the enforced answer: emits deltas as soon as their text is known."""

    legacy: bool
    buffer: str = ""
    pos: int = 0
    mode: str | None = None  # "content", "tool_calls", "text" (not our format), "done"
    calls: int = 0
    in_arguments: bool = False
    closing: bool = False  # the arguments of a call ended; its closing brace is still to come
    depth: int = 0
    in_string: bool = False
    escaped: bool = False

    def flush(self, cut: bool) -> list[dict[str, Any]]:
        """Text is given out as soon as it is known; a call cut before its arguments began is given out
        with the name so far and no arguments, as OpenAI gives out whatever a cut answer generated."""
        if not (cut and self.mode == "tool_calls" and not self.in_arguments and not self.closing):
            return []
        named = _CALL_NAME.match(self.buffer, self.pos)
        return [self._begin_call(named.group(1))] if named and named.group(1) else []

    def feed(self, text: str) -> list[dict[str, Any]]:
        self.buffer += text
        out: list[dict[str, Any]] = []
        while True:
            before = (self.pos, self.mode, self.in_arguments)
            if self.mode is None:
                self._open()
            elif self.mode == "text":
                if self.pos < len(self.buffer):
                    out.append({"content": self.buffer[self.pos :]})
                    self.pos = len(self.buffer)
            elif self.mode == "content":
                out.extend(self._content())
            elif self.mode == "tool_calls":
                out.extend(self._tool_calls())
            if before == (self.pos, self.mode, self.in_arguments):
                return out

    def _open(self) -> None:
        rest = self.buffer[self.pos :]
        match = _OPEN.match(rest)
        if match and (match.group(1) == "content" or match.group(2)) and match.end() < len(rest):
            self.mode, self.pos = match.group(1), self.pos + match.end()
            if self.mode == "content":
                if self.buffer[self.pos] != '"':
                    self.mode = "text"
                else:
                    self.pos += 1
        elif rest.strip() and not _could_open(rest):
            self.mode = "text"  # a model that was not constrained answered in plain text

    def _content(self) -> list[dict[str, Any]]:
        text, i = [], self.pos
        while i < len(self.buffer):
            char = self.buffer[i]
            if char == '"':
                self.mode, i = "done", i + 1
                break
            if char == "\\":
                escape = (
                    self.buffer[i : i + 6] if self.buffer[i + 1 : i + 2] == "u" else self.buffer[i : i + 2]
                )
                if len(escape) < (6 if escape[1:2] == "u" else 2):
                    break  # the escape is not complete yet
                try:
                    text.append(json.loads(f'"{escape}"'))
                except json.JSONDecodeError:  # half a surrogate pair: wait for the other half
                    pair = self.buffer[i : i + 12]
                    if len(pair) < 12:
                        break
                    text.append(json.loads(f'"{pair}"'))
                    escape = pair
                i += len(escape)
                continue
            text.append(char)
            i += 1
        self.pos = i
        return [{"content": "".join(text)}] if text else []

    def _tool_calls(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self.in_arguments:
            if self.closing:
                self._close_call()
                if self.closing:
                    return out
            rest = self.buffer[self.pos :]
            match = _CALL_START.match(rest)
            if not match or match.end() == len(rest):
                if re.match(r"\s*\]", rest):
                    self.mode = "done"
                return out
            self.pos += match.end()
            self.in_arguments, self.depth = True, 0
            out.append(self._begin_call(match.group(1)))
        # The arguments pass on as written, less the whitespace between tokens: OpenAI's are compact, and
        # the decoder lets a model indent.
        kept, i = [], self.pos
        while i < len(self.buffer):
            char = self.buffer[i]
            i += 1
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif char == "\\":
                    self.escaped = True
                elif char == '"':
                    self.in_string = False
            elif char in " \t\n\r":
                continue
            elif char == '"':
                self.in_string = True
            elif char in "{[":
                self.depth += 1
            elif char in "}]":
                self.depth -= 1
            kept.append(char)
            if self.depth == 0 and not self.in_string:
                self.in_arguments = False
                break
        piece = "".join(kept)
        self.pos = i
        if piece:
            if self.legacy:
                out.append({"function_call": {"arguments": piece}})
            else:
                out.append({"tool_calls": [{"index": self.calls - 1, "function": {"arguments": piece}}]})
        if not self.in_arguments:
            self.closing = True
            self._close_call()
        return out

    def _begin_call(self, escaped_name: str) -> dict[str, Any]:
        self.calls += 1
        name = json.loads(f'"{escaped_name}"')
        if self.legacy:
            return {"function_call": {"name": name, "arguments": ""}}
        call_id = f"call_{uuid.uuid4().hex[:24]}"
        function = {"name": name, "arguments": ""}
        call = {"index": self.calls - 1, "id": call_id, "type": "function", "function": function}
        return {"tool_calls": [call]}

    def _close_call(self) -> None:
        """Step over the `}` that ends a call, once it has arrived."""
        end = _CALL_END.match(self.buffer, self.pos)
        if end:
            self.pos, self.closing = end.end(), False


def _could_open(text: str) -> bool:
    """Whether `text` may still grow into the start of the JSON answer."""
    stripped = text.lstrip()
    return stripped == "" or stripped.startswith("{")


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


def _calls_text(calls: list[dict[str, Any]]) -> str:
    rendered = []
    for call in calls:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            arguments = function.get("arguments")
        rendered.append({"name": function.get("name"), "arguments": arguments})
    return json.dumps({"tool_calls": rendered}, ensure_ascii=False)


def _plain(message: dict[str, Any]) -> bool:
    return message["role"] in ("system", "user", "assistant") and not message.get("tool_calls")


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


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
