"""The second step of tool calling: the conversation as a chat template renders it. Calls and results become
text where the template does not show tools itself (in the answer format the plan asks for, or as plain
sentences when no tools are offered), and the plan's tools are described in the system message."""

from __future__ import annotations

import json
from typing import Any

from modelport.protocol.validation import json_value
from modelport.service.generation.tools.plan import ToolPlan


def render_history(
    messages: list[dict[str, Any]], plan: ToolPlan | None, native: bool = False
) -> list[dict[str, Any]]:
    """Messages any chat template can render: `developer` becomes `system`, an assistant's refusal becomes
    what it said, neighbouring text messages of one role merge (for templates that demand strict
    alternation), and unless the template renders tools
    itself (`native`), tool calls and results become text: in the answer format the model is asked for
    when tools are offered, and as plain sentences when none is (a model shown calls written as JSON
    writes its answer as another such call, which then reaches the user as text)."""
    names: dict[str, str] = {}  # call id → how its result is introduced
    rendered: list[dict[str, Any]] = []
    for original in messages:
        message = dict(original)
        role = message["role"] = "system" if message["role"] == "developer" else message["role"]
        if role == "assistant":
            message["content"] = _said(message.get("content"), message.pop("refusal", None))
        if native:
            pass  # the template renders tool calls and results itself
        elif role == "assistant" and (message.get("tool_calls") or message.get("function_call")):
            calls = message.pop("tool_calls", None) or [{"function": message.pop("function_call")}]
            for call in calls:
                if call.get("id"):
                    names[call["id"]] = _called(call["function"], plan is None)
            if plan is not None:
                message["content"] = "\n".join(
                    filter(None, [content_text(message.get("content")), _calls_text(calls)])
                )
            elif not content_text(message.get("content")):
                continue  # the results below say what was called
        elif role == "tool":
            call_id = message.get("tool_call_id")
            introduced = names.get(call_id or "", "a tool")
            heading = f"Result of {introduced} (call {call_id})" if plan is not None else f"{introduced} gave"
            message = {"role": "user", "content": f"{heading}:\n{content_text(message.get('content'))}"}
        elif role == "function":
            name = message.get("name", "a function")
            message = {
                "role": "user",
                "content": f"Result of {name}:\n{content_text(message.get('content'))}",
            }
        if rendered and rendered[-1]["role"] == message["role"] and _plain(message) and _plain(rendered[-1]):
            previous = rendered[-1]
            previous["content"] = _merged(previous.get("content"), message.get("content"))
        else:
            rendered.append(message)
    if plan is not None and not native:
        if rendered and rendered[0]["role"] == "system":
            rendered[0]["content"] = f"{content_text(rendered[0].get('content'))}\n\n{plan.system_prompt()}"
        else:
            rendered.insert(0, {"role": "system", "content": plan.system_prompt()})
    return rendered


def _calls_text(calls: list[dict[str, Any]]) -> str:
    rendered = []
    for call in calls:
        function = call.get("function") or {}
        try:
            arguments = json_value(function.get("arguments") or "{}")
        except ValueError:
            arguments = function.get("arguments")
        rendered.append({"name": function.get("name"), "arguments": arguments})
    return json.dumps({"tool_calls": rendered}, ensure_ascii=False)


def _called(function: dict[str, Any], with_arguments: bool) -> str:
    """How a call's result is introduced: by the tool's name, and (when no tools are offered, so the call
    itself is not shown) its arguments."""
    arguments = (function.get("arguments") or "").strip() if with_arguments else ""
    return f"{function.get('name')} {arguments}".strip()


def _said(content: Any, refusal: Any) -> Any:
    """An assistant's content with its refusal as text: the `refusal` parts OpenAI's answers are sent back
    with (which no template or engine reads), or the message's `refusal` where it has no content; parts
    that are all text, as the one text they are."""
    if isinstance(content, list):
        parts = [
            {"type": "text", "text": str(part.get("refusal") or "")}
            if isinstance(part, dict) and part.get("type") == "refusal"
            else part
            for part in content
        ]
        texts = all(isinstance(part, dict) and part.get("type") == "text" for part in parts)
        return content_text(parts) if texts and parts else parts
    return refusal if not content and isinstance(refusal, str) else content


def _plain(message: dict[str, Any]) -> bool:
    return message["role"] in ("system", "user", "assistant") and not message.get("tool_calls")


def _merged(first: Any, second: Any) -> str | list[dict[str, Any]]:
    """Two messages' contents as one, a blank line between their texts; parts stay parts where either
    holds an image, sound or a file, which joining the texts would drop."""
    parts = [_parts(first), _parts(second)]
    if all(part.get("type") == "text" for part in [*parts[0], *parts[1]]):
        return f"{content_text(first)}\n\n{content_text(second)}"
    if parts[0] and parts[1] and parts[1][0].get("type") == "text":
        parts[1][0] = {**parts[1][0], "text": f"\n\n{parts[1][0].get('text', '')}"}
    return [*parts[0], *parts[1]]


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [part for part in content or [] if isinstance(part, dict)]


def content_text(content: Any) -> str:
    """A message's content as text (its text parts, where it is a list of them)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))
