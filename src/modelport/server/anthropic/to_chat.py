"""A Messages request as the chat completion request it stands for: system blocks as the system message,
`tool_result` blocks as tool messages, `tool_use` blocks as the assistant's tool calls, thinking blocks
(their signature checked) as the assistant's reasoning, images and documents as content parts; tools,
tool choice, thinking and output format as their chat counterparts."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest
from modelport.protocol.sent_as import Message, SentAs, renamed
from modelport.protocol.validation import parse
from modelport.server.anthropic import defined_tools
from modelport.server.anthropic.message_request import (
    Base64Source,
    ContentSource,
    DocumentIn,
    ImageIn,
    MessagesRequest,
    PlainTextSource,
    RedactedThinkingIn,
    SearchResultIn,
    TextIn,
    ThinkingIn,
    ToolResultIn,
    ToolUseIn,
    UrlSource,
)

# Whether a thinking block's signature is this server's seal of its text (None: nothing to check with).
Verify = Callable[[str, str, str], None] | None

# A thinking budget as the effort whose budget holds it (`service/generation/formats/effort.py`).
_EFFORT_BY_BUDGET = ((1024, "low"), (4096, "medium"), (16384, "high"))
_TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}
# The chat's fields a Messages request sends under other names.
_FIELDS = {"max_completion_tokens": "max_tokens", "stop": "stop_sequences"}
_OUTPUT_FORMAT = ("output_config.format", "output_config.format.schema")  # the answer's format, its schema


def chat_request(
    given: MessagesRequest, verify: Verify, *, stream: bool
) -> tuple[ChatCompletionRequest, SentAs]:
    """The chat completion request `given` stands for, and how `given` named its parts (for the chat's
    400s); a 400 naming the field for what has no counterpart."""
    messages: list[dict[str, Any]] = []
    origins: list[Message | None] = []
    if given.system:
        system = given.system if isinstance(given.system, str) else "\n\n".join(b.text for b in given.system)
        messages.append({"role": "system", "content": system})
        origins.append(Message("system"))
    for i, message in enumerate(given.messages):
        if message.role == "user":
            made = _user(message.content, f"messages[{i}].content")
        else:
            made = [_assistant(message.content, f"messages[{i}].content", verify)]
        # A user message's blocks are the chat message's parts, unless tool results were taken out of it.
        inside = message.role == "user" and len(made) == 1
        messages += made
        origins += [Message(f"messages[{i}]", inside)] * len(made)
    if given.stop_sequences is not None and len(given.stop_sequences) > 4:
        raise InvalidRequestError("At most 4 stop_sequences are served here.", param="stop_sequences")
    body: dict[str, Any] = {
        "model": given.model,
        "messages": messages,
        "max_completion_tokens": given.max_tokens,
        "stream": stream,
        "reasoning_effort": _effort(given),
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    optional = {
        "stop": given.stop_sequences,
        "temperature": given.temperature,
        "top_p": given.top_p,
        "top_k": given.top_k,
        "user": given.metadata.user_id if given.metadata else None,
    }
    body.update({name: value for name, value in optional.items() if value is not None})
    offered = [
        defined_tools.function(tool.type, tool.name, tool.description, tool.input_schema, f"tools[{i}]")
        for i, tool in enumerate(given.tools or [])
    ]
    if any(offered):
        body["tools"] = [{"type": "function", "function": function} for function in offered if function]
    places = [f"tools[{i}]" for i, function in enumerate(offered) if function]
    sent = SentAs(origins, _FIELDS, places, "input_schema", _OUTPUT_FORMAT)
    choice = given.tool_choice
    if choice is not None:
        if choice.type == "tool":
            if not choice.name:
                raise InvalidRequestError(
                    "tool_choice of type 'tool' names the tool.", param="tool_choice.name"
                )
            left_out = {t.name for t, f in zip(given.tools or [], offered, strict=True) if f is None}
            if choice.name in left_out:
                raise InvalidRequestError(
                    f"tool_choice forces `{choice.name}`, one of Anthropic's server tools, which run on "
                    "Anthropic's machines, not here.",
                    param="tool_choice.name",
                )
            body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
        else:
            body["tool_choice"] = _TOOL_CHOICE[choice.type]
        if choice.disable_parallel_tool_use:
            body["parallel_tool_calls"] = False
    output = given.output_config
    if output is not None and output.format is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": output.format.schema_, "strict": True},
        }
    with renamed(sent):
        return parse(ChatCompletionRequest, body), sent


def _effort(given: MessagesRequest) -> str:
    """The reasoning effort: none unless thinking is asked for (Anthropic's default), then the effort whose
    budget holds `budget_tokens`, or `output_config.effort`."""
    thinking, effort = given.thinking, given.output_config.effort if given.output_config else None
    if thinking is None:
        return effort or "none"
    if thinking.type == "disabled":
        return "none"
    if thinking.type == "enabled" and thinking.budget_tokens is not None:
        return next((e for bound, e in _EFFORT_BY_BUDGET if thinking.budget_tokens <= bound), "xhigh")
    return effort or "medium"


def _user(content: str | list[Any], param: str) -> list[dict[str, Any]]:
    """A user turn: its tool results as tool messages (first, as Anthropic orders them), then the rest as
    one user message."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    turn: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        where = f"{param}[{j}]"
        if isinstance(block, ToolResultIn):
            text, images = _tool_result(block)
            turn.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": text})
            parts.extend(images)  # a tool message holds text: what it showed follows as the user's
        elif isinstance(block, TextIn | ImageIn | DocumentIn | SearchResultIn):
            parts.append(_part(block))
        else:
            raise InvalidRequestError(
                f"A user message cannot hold a {block.type} block.", param=f"{where}.type"
            )
    if parts:
        turn.append({"role": "user", "content": parts})
    return turn


def _tool_result(block: ToolResultIn) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(block.content, str):
        text, images = block.content, []
    else:
        said = [_part(b)["text"] for b in block.content if isinstance(b, TextIn | SearchResultIn)]
        text = "\n".join(said)
        images = [_part(b) for b in block.content if not isinstance(b, TextIn | SearchResultIn)]
    return (f"Error: {text}" if block.is_error else text), images


def _assistant(content: str | list[Any], param: str, verify: Verify) -> dict[str, Any]:
    """An assistant turn: its text, its tool calls and its reasoning (a thinking block this server
    signed)."""
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for j, block in enumerate(content):
        where = f"{param}[{j}]"
        if isinstance(block, TextIn):
            texts.append(block.text)
        elif isinstance(block, ToolUseIn):
            arguments = json.dumps(block.input, ensure_ascii=False)
            calls.append(
                {"id": block.id, "type": "function", "function": {"name": block.name, "arguments": arguments}}
            )
        elif isinstance(block, ThinkingIn):
            if verify is not None:
                verify(block.signature, block.thinking, f"{where}.signature")
            reasoning.append(block.thinking)
        elif not isinstance(block, RedactedThinkingIn):  # redacted thinking: none is made here
            raise InvalidRequestError(
                f"An assistant message cannot hold a {block.type} block.", param=f"{where}.type"
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = "\n".join(reasoning)
    return message


def _part(block: TextIn | ImageIn | DocumentIn | SearchResultIn) -> dict[str, Any]:
    """A text, image, document or search result block as a chat content part."""
    if isinstance(block, TextIn):
        return {"type": "text", "text": block.text}
    if isinstance(block, SearchResultIn):
        texts = "\n".join(text.text for text in block.content)
        return {"type": "text", "text": f"{block.title} ({block.source}):\n{texts}"}
    if isinstance(block, ImageIn):
        image = block.source
        url = image.url if isinstance(image, UrlSource) else f"data:{image.media_type};base64,{image.data}"
        return {"type": "image_url", "image_url": {"url": url}}
    source = block.source
    title = block.title or "document"
    if isinstance(source, PlainTextSource):
        return {"type": "text", "text": f"{title}:\n{source.data}"}
    if isinstance(source, ContentSource):
        inner = (
            source.content if isinstance(source.content, str) else "\n".join(b.text for b in source.content)
        )
        return {"type": "text", "text": f"{title}:\n{inner}"}
    if isinstance(source, Base64Source):
        data = f"data:{source.media_type};base64,{source.data}"
        return {"type": "file", "file": {"file_data": data, "filename": title}}
    return {"type": "file", "file": {"file_url": source.url, "filename": title}}
