"""Responses items ↔ chat messages, and the parameters of a Responses request as chat parameters.

A turn's conversation is its instructions, then every earlier turn's input and output (the stored chain of
`previous_response_id`), then its own input; the chat path does the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from openai.types.responses import (
    ResponseFormatTextJSONSchemaConfig,
    ResponseInputItem,
    ToolChoiceAllowed,
)
from openai.types.shared import ResponseFormatJSONObject, ResponseFormatText

from modelport import ids
from modelport.errors import InvalidRequestError
from modelport.protocol.response_request import ResponseRequest, TextFormat
from modelport.protocol.tagged_unions import by_type
from modelport.protocol.validation import check_as
from modelport.service.responses.client_tools import INPUT, ClientTools, chat_name
from modelport.service.responses.defined_tools import CALLS, DEFINED, OUTPUTS, call_id_of_output
from modelport.store.response_rows import ID_CHARS  # the longest id a client may give an item

_ROLES = ("user", "system", "developer", "assistant")
_TEXT_PARTS = ("input_text", "output_text", "text")
_PARTS = (*_TEXT_PARTS, "refusal", "input_file", "input_image", "input_audio")
# Items a turn may be given back that no chat message stands for: the items of tools the server ran.
_SERVER_ITEMS = ("file_search_call", "mcp_list_tools", "mcp_call", "mcp_approval_request", "tool_search_call")
# An `allowed_tools` choice of mode `required` that names none of the request's tools.
NONE_ALLOWED = (
    "tool_choice allows none of the request's tools (allowed_tools names each by its type and name)."
)
# How a compaction item (a summary of the turns it replaced) reaches the model.
SUMMARY_PREFIX = "Summary of the conversation so far:"


def new_item_id(prefix: str) -> str:
    """An id in OpenAI's style: `resp_…`, `msg_…`, `fc_…`."""
    return ids.new_id(prefix, "_")


def input_items(request: ResponseRequest) -> list[dict[str, Any]]:
    """This turn's input as items with ids (a string is one user message); an `item_reference` is left for
    the stored turns to resolve (`StoredTurns.referenced`)."""
    return checked_items(request.input, "input", references=True)


def checked_items(
    given: str | list[dict[str, Any]], param: str, references: bool = False
) -> list[dict[str, Any]]:
    """Input items (a turn's, or added to a conversation) checked and given ids; a string is one user
    message; a 400 names the item at fault as `param[i]`. `references`: an `item_reference` (an item of
    a stored response, by its id) is kept as it is."""
    if isinstance(given, str):
        return [
            {
                "id": new_item_id("msg"),
                "type": "message",
                "role": "user",
                "content": [_text("input_text", given)],
            }
        ]
    items = []
    for i, raw in enumerate(given):
        if not isinstance(raw, dict):
            raise InvalidRequestError(f"{param}[{i}] must be an object.", param=f"{param}[{i}]")
        item = dict(raw)
        kind = item.setdefault("type", "message")
        given_id = item.get("id")
        if given_id is not None and (not isinstance(given_id, str) or not 0 < len(given_id) <= ID_CHARS):
            raise InvalidRequestError(
                f"{param}[{i}].id must be a string of 1 to {ID_CHARS} characters.", param=f"{param}[{i}].id"
            )
        if kind == "message":
            if item.get("role") not in _ROLES:
                raise InvalidRequestError(
                    f"{param}[{i}].role must be one of {', '.join(_ROLES)}.", param=f"{param}[{i}].role"
                )
            content = item.get("content")
            if isinstance(content, str):
                part = "output_text" if item["role"] == "assistant" else "input_text"
                item["content"] = [_text(part, content)]
            elif not isinstance(content, list):
                raise InvalidRequestError(
                    f"{param}[{i}].content must be a string or a list of content parts.",
                    param=f"{param}[{i}].content",
                )
            for j, part in enumerate(item["content"]):
                if not isinstance(part, dict) or part.get("type") not in _PARTS:
                    shown = part.get("type") if isinstance(part, dict) else type(part).__name__
                    raise InvalidRequestError(
                        f"{param}[{i}].content[{j}] is `{shown}`; parts are {', '.join(_PARTS)}.",
                        param=f"{param}[{i}].content[{j}].type",
                    )
            item.setdefault("id", new_item_id("msg"))
        elif kind == "function_call":
            _require(item, f"{param}[{i}]", "call_id", "name", "arguments")
            item.setdefault("id", new_item_id("fc"))
        elif kind == "function_call_output":
            # Codex gives context as the output of a tool it names, with no call (`name`, `namespace`).
            _require(item, f"{param}[{i}]", "output", *(() if item.get("name") else ("call_id",)))
            item.setdefault("id", new_item_id("fco"))
        elif kind == "custom_tool_call":
            _require(item, f"{param}[{i}]", "call_id", "name", "input")
            item.setdefault("id", new_item_id("ctc"))
        elif kind == "custom_tool_call_output":
            _require(item, f"{param}[{i}]", "call_id", "output")
            item.setdefault("id", new_item_id("ctco"))
        elif kind in CALLS:  # a call of a tool OpenAI defines (`shell`, `apply_patch`, `local_shell`)
            _require(item, f"{param}[{i}]", "call_id")
            item.setdefault("id", new_item_id(DEFINED[CALLS[kind]].id_prefix.rstrip("_")))
        elif kind in OUTPUTS:
            # A `local_shell_call_output` names its call by its `id`, the others by `call_id`.
            _require(item, f"{param}[{i}]", "id" if kind == "local_shell_call_output" else "call_id")
            item.setdefault("id", new_item_id("out"))
        elif kind in ("additional_tools", "tool_search_output"):  # tools this turn adds (`client_tools`)
            if not isinstance(item.get("tools"), list):
                raise InvalidRequestError(
                    f"{param}[{i}].tools must be a list of tools.", param=f"{param}[{i}].tools"
                )
            item.setdefault("id", new_item_id("at"))
        elif kind == "mcp_approval_response":
            _require(item, f"{param}[{i}]", "approval_request_id", "approve")
            item.setdefault("id", new_item_id("mcpa"))
        elif kind == "compaction":
            _require(item, f"{param}[{i}]", "encrypted_content")
            if not isinstance(item["encrypted_content"], str):
                raise InvalidRequestError(
                    f"{param}[{i}].encrypted_content must be a string.",
                    param=f"{param}[{i}].encrypted_content",
                )
            item.setdefault("id", new_item_id("cmp"))
        elif kind == "reasoning":  # an earlier turn's thinking, given back (sealed, or as its text)
            for field in ("summary", "content"):
                if item.get(field) is not None and not isinstance(item[field], list):
                    raise InvalidRequestError(
                        f"{param}[{i}].{field} must be a list of parts.", param=f"{param}[{i}].{field}"
                    )
            sealed = item.get("encrypted_content")
            if sealed is not None and not isinstance(sealed, str):
                raise InvalidRequestError(
                    f"{param}[{i}].encrypted_content must be a string.",
                    param=f"{param}[{i}].encrypted_content",
                )
            item.setdefault("id", new_item_id("rs"))
            item.setdefault("summary", [])
        elif kind in _SERVER_ITEMS:
            pass  # given back whole (as the Agents SDK does): the answer after them says what they found
        elif kind == "item_reference" and references:  # the Vercel AI SDK's, for items it was answered with
            if not isinstance(given_id, str):
                raise InvalidRequestError(f"{param}[{i}].id is required.", param=f"{param}[{i}].id")
        elif kind == "compaction_trigger" and references:  # the turn compacts its context, and only that
            if i != len(given) - 1:
                raise InvalidRequestError(
                    f"{param}[{i}] is a compaction_trigger, which must be the final input item.",
                    param=f"{param}[{i}].type",
                )
            item.setdefault("id", new_item_id("ct"))
        else:
            raise InvalidRequestError(
                f"{param}[{i}] is a `{kind}` item, which this server does not support here; it takes "
                "messages, function, custom, shell, apply_patch and local_shell calls and their outputs, "
                "reasoning, additional_tools and compaction items (and a turn's input, item references and a "
                "final compaction_trigger).",
                param=f"{param}[{i}].type",
            )
        if kind != "message":
            # The types of its fields as the SDK has them; Codex leaves out some it requires.
            check_as(_ITEM_TYPES, item, f"{param}[{i}]", required=False)
        items.append(item)
    return items


# Each input item type's model in the `openai` package, by its `type` (a message has several: checked here).
_ITEM_TYPES = by_type(ResponseInputItem)


def opened(
    items: list[dict[str, Any]], open_sealed: Callable[[str, str], str], param: str
) -> list[dict[str, Any]]:
    """Items whose sealed reasoning (`encrypted_content`) is opened into its text (a 400 naming
    `param[i].encrypted_content` for a blob this server did not seal)."""
    out = []
    for i, item in enumerate(items):
        sealed = item.get("encrypted_content") if item.get("type") == "reasoning" else None
        if isinstance(sealed, str) and sealed:
            text = open_sealed(sealed, f"{param}[{i}].encrypted_content")
            item = {**item, "content": [{"type": "reasoning_text", "text": text}]}
        out.append(item)
    return out


def thinking(item: dict[str, Any]) -> str:
    """A reasoning item's thinking: its text, else its summary."""
    parts = item.get("content") or item.get("summary") or []
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))


def messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages for items: consecutive function calls become one assistant message with its calls; a
    reasoning item is the thinking (`reasoning_content`) of the assistant message that follows it."""
    return _chat(items)[0]


def made_by(items: list[dict[str, Any]]) -> list[int]:
    """For each chat message `messages(items)` makes, the index of the item that made it."""
    return _chat(items)[1]


def _chat(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """`messages(items)`, and `made_by(items)`."""
    chat: list[dict[str, Any]] = []
    made: list[int] = []
    thought = ""  # a reasoning item's, until the assistant message it led to
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        before = len(chat)
        if kind == "reasoning":
            thought += thinking(item)
        elif kind == "message":
            role = "system" if item["role"] == "developer" else item["role"]
            chat.append({"role": role, "content": _chat_content(item["content"])})
        elif kind in ("function_call", "custom_tool_call", *CALLS):
            if kind in CALLS:  # a defined tool's: its function is named for the tool
                name, arguments = CALLS[kind], json.dumps(DEFINED[CALLS[kind]].arguments(item))
            else:
                custom = kind == "custom_tool_call"
                arguments = json.dumps({INPUT: item["input"]}) if custom else item["arguments"]
                name = chat_name(item["name"], item.get("namespace"))
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            last = chat[-1] if chat else None
            if last and last["role"] == "assistant" and last.get("tool_calls") and not last.get("content"):
                last["tool_calls"].append(call)
            else:
                chat.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item["output"]
            text = output if isinstance(output, str) else _joined(output) if isinstance(output, list) else ""
            if item.get("call_id") is None:  # the output of no call: what a tool of the client's says
                said = ".".join(filter(None, [item.get("namespace"), item.get("name")]))
                chat.append({"role": "user", "content": f"{said}: {text}"})
            else:
                chat.append({"role": "tool", "tool_call_id": item["call_id"], "content": text})
        elif kind in OUTPUTS:
            said = DEFINED[OUTPUTS[kind]].output(item)
            chat.append({"role": "tool", "tool_call_id": call_id_of_output(item), "content": said})
        elif kind == "compaction":  # a summary of the turns it replaced (`compaction`)
            summary = f"{SUMMARY_PREFIX}\n{item['encrypted_content']}"
            chat.append({"role": "assistant", "content": summary})
        if thought and len(chat) > before and chat[-1]["role"] == "assistant":
            chat[-1]["reasoning_content"] = thought
            thought = ""
        elif kind not in ("reasoning", "function_call", "custom_tool_call", *CALLS):
            thought = ""  # thinking that led to no answer of the model's is not given back
        made += [i] * (len(chat) - before)
    return chat, made


def chat_fields(request: ResponseRequest, tools: ClientTools, choice: str | None = None) -> dict[str, Any]:
    """The chat completion parameters a Responses request stands for (less its messages): its client-run
    `tools` as chat functions (the server puts in the functions that stand for its own), and `choice`
    stands for a `tool_choice` that names one of the server's."""
    refuse_unsupported(request)
    fields: dict[str, Any] = {
        k: v for k, v in request.extras().items() if k not in ("store", "metadata", "stream", "background")
    }
    for name in (
        "temperature",
        "top_p",
        "presence_penalty",
        "frequency_penalty",
        "user",
        "parallel_tool_calls",
    ):
        value = getattr(request, name)
        if value is not None:
            fields[name] = value
    if request.max_output_tokens is not None:
        fields["max_completion_tokens"] = request.max_output_tokens
    if request.reasoning is not None and request.reasoning.effort is not None:
        fields["reasoning_effort"] = request.reasoning.effort
    if request.top_logprobs or "message.output_text.logprobs" in (request.include or []):
        fields.update(logprobs=True, top_logprobs=request.top_logprobs or 0)
    offered = tools.offered(request.tool_choice)
    if offered:
        fields["tools"] = offered
    allowed = request.tool_choice if isinstance(request.tool_choice, ToolChoiceAllowed) else None
    if allowed is not None and not offered and choice is None:  # and no tool the server runs
        if allowed.mode == "required":
            raise InvalidRequestError(NONE_ALLOWED, param="tool_choice")
    elif request.tool_choice is not None:
        fields["tool_choice"] = choice or tools.choice(request.tool_choice)
    response_format = _chat_format(request.text.format if request.text is not None else None)
    if response_format is not None:
        fields["response_format"] = response_format
    return fields


def refuse_unsupported(request: ResponseRequest) -> None:
    """A 400 naming each parameter a local model cannot honour, or that contradicts another (the values of
    each are the request type's to check)."""
    if request.conversation is not None and request.previous_response_id is not None:
        raise InvalidRequestError(
            "conversation and previous_response_id cannot both be given: a turn continues one or the other.",
            param="conversation",
        )
    if request.prompt is not None:
        raise InvalidRequestError("Stored prompt templates (prompt) are not supported.", param="prompt")


def output_items(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A stored response's output, as input items of the next turn."""
    kept = ("message", "function_call", "custom_tool_call", "reasoning", "compaction", *CALLS)
    return [item for item in response.get("output") or [] if item.get("type") in kept]


def _chat_format(form: TextFormat | None) -> dict[str, Any] | None:
    """`text.format` as chat's `response_format` (None: plain text)."""
    if form is None or isinstance(form, ResponseFormatText):
        return None
    if isinstance(form, ResponseFormatJSONObject):
        return {"type": "json_object"}
    if isinstance(form, ResponseFormatTextJSONSchemaConfig):
        sent = form.to_dict(mode="json")  # as the request gave it: chat's `json_schema` has these of it
        spec = {k: sent[k] for k in ("name", "schema", "description", "strict") if k in sent}
        return {"type": "json_schema", "json_schema": spec}
    raise InvalidRequestError(  # a format an `openai` release newer than this server's code knows
        f"text.format.type must be text, json_object or json_schema, not {form.type!r}.",
        param="text.format.type",
    )


def _text(kind: str, text: str) -> dict[str, Any]:
    part: dict[str, Any] = {"type": kind, "text": text}
    if kind == "output_text":
        part["annotations"] = []
    return part


def _chat_content(parts: list[Any]) -> str | list[dict[str, Any]]:
    """A message's parts as chat content: its text, or chat parts when it holds files, images or audio
    (which the chat path reads, or refuses by name)."""
    if all(isinstance(p, str) or p.get("type") in (*_TEXT_PARTS, "refusal") for p in parts):
        return _joined(parts)
    chat: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else "input_text"
        if kind == "input_file":
            fields = ("file_id", "file_data", "file_url", "filename")
            chat.append({"type": "file", "file": {k: part[k] for k in fields if part.get(k)}})
        elif kind == "input_image":
            image = {"type": "input_image", "image_url": part.get("image_url") or part.get("file_id")}
            chat.append({**image, "detail": part["detail"]} if part.get("detail") else image)
        elif kind == "input_audio":
            chat.append({"type": "input_audio", "input_audio": part.get("input_audio")})
        else:
            chat.append({"type": "text", "text": _joined([part])})
    return chat


def _joined(parts: list[Any]) -> str:
    texts = []
    for part in parts:
        if isinstance(part, dict):
            texts.append(str(part.get("text") or part.get("refusal") or ""))
        elif isinstance(part, str):
            texts.append(part)
    return "".join(texts)


def _require(item: dict[str, Any], where: str, *names: str) -> None:
    for name in names:
        if item.get(name) is None:
            raise InvalidRequestError(f"{where}.{name} is required.", param=f"{where}.{name}")
    if "arguments" in names and not isinstance(item["arguments"], str):
        item["arguments"] = json.dumps(item["arguments"])
