"""The tools a Responses turn's client runs, as Codex sends them: custom tools (free text, or held to a Lark
grammar written out as a regex), namespaces, tools an `additional_tools` item adds, and hosted tools that
are listed but cannot run here; the calls the model makes come back as the items and events of each
kind."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from openai.types.responses import Tool, ToolChoiceCustom, ToolChoiceTypes

from modelport.errors import InvalidRequestError
from modelport.protocol.response_object import ResponseObject
from modelport.protocol.response_request import tool_of
from modelport.service.generation.lark_regex import to_regex
from modelport.service.responses import items
from modelport.service.responses.client_tools import added_tools, client_tools
from modelport.service.responses.event_stream import wire
from modelport.service.responses.response_events import ResponseEvents
from modelport.service.responses.server_tools import SERVED
from tests.service.test_response_events import HEAD, call, chunk, skeleton
from tests.support import openresponses

# Codex 0.171's `apply_patch` grammar, as it sends it.
APPLY_PATCH = (
    'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n'
    'end_patch: "*** End Patch" LF?\n\n'
    "hunk: add_hunk | delete_hunk | update_hunk\n"
    'add_hunk: "*** Add File: " filename LF add_line+\ndelete_hunk: "*** Delete File: " filename LF\n'
    'update_hunk: "*** Update File: " filename LF change_move? change?\n\nfilename: /(.+)/\n'
    'add_line: "+" /(.*)/ LF -> line\n\nchange_move: "*** Move to: " filename LF\n'
    "change: (change_context | change_line)+ eof_line?\n"
    'change_context: ("@@" | "@@ " /(.+)/) LF\nchange_line: ("+" | "-" | " ") /(.*)/ LF\n'
    'eof_line: "*** End of File" LF\n\n%import common.LF\n'
)
CUSTOM = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH},
}
SHELL = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}}
NAMESPACE = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Sub-agents.",
    "tools": [{"type": "function", "name": "close_agent", "parameters": {"type": "object"}}],
}


def test_a_lark_grammar_without_recursion_is_one_regex() -> None:
    pattern = to_regex(APPLY_PATCH)
    assert pattern is not None
    patch = "*** Begin Patch\n*** Update File: a.py\n@@ def f\n-x\n+y\n*** End Patch\n"
    assert re.fullmatch(pattern, patch)
    assert re.fullmatch(pattern, "*** Begin Patch\n*** Add File: b.txt\n+hi\n*** End Patch")
    assert not re.fullmatch(pattern, "*** Begin Patch\n*** End Patch\n")  # a hunk at least
    assert not re.fullmatch(pattern, "*** Begin Patch\nhello\n*** End Patch\n")
    assert to_regex('start: "(" start ")" | "x"') is None  # recursion: not regular
    assert to_regex('start: WORD\n%ignore " "\n%import common.WORD') is None
    assert to_regex('start: "a"i ~ 2 "b"') == "^((([aA])){2,2}(b))$"


def typed(tools: list[dict[str, Any]]) -> list[Tool]:
    """Tools as a request's `tools` holds them."""
    return [tool_of(tool, f"tools[{i}]") for i, tool in enumerate(tools)]


@pytest.mark.parametrize(
    ("syntax", "definition", "said"),
    [
        ("regex", "^(?=.*[A-Z]).+$", "look-around"),  # Python's `re` reads it; llguidance cannot hold it
        ("regex", "((", "unclosed group"),
        ("lark", 'start: "a" /(?<=a)b/', "look-around"),
    ],
)
def test_a_custom_tool_s_grammar_llguidance_cannot_hold_is_a_400_naming_its_definition(
    syntax: str, definition: str, said: str
) -> None:
    """Where llguidance cannot compile the input's pattern, llama.cpp decoded the call unconstrained."""
    custom = {
        "type": "custom",
        "name": "t",
        "format": {"type": "grammar", "syntax": syntax, "definition": definition},
    }
    with pytest.raises(InvalidRequestError) as refused:
        client_tools(typed([custom]), [], SERVED)
    assert refused.value.param == "tools[0].format.definition"
    assert said in refused.value.message


def test_a_custom_tool_s_regex_in_rust_s_syntax_is_held() -> None:
    """`\\p{Lu}` is Rust's regex (OpenAI's and llguidance's syntax), not Python's."""
    custom = {
        "type": "custom",
        "name": "t",
        "format": {"type": "grammar", "syntax": "regex", "definition": r"\p{Lu}"},
    }
    offered = client_tools(typed([custom]), [], SERVED)
    assert offered.chat[0]["function"]["parameters"]["properties"]["input"]["pattern"] == r"^(\p{Lu})$"


def test_codex_tools_are_offered_as_chat_functions_and_hosted_ones_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools = [SHELL, NAMESPACE, CUSTOM, {"type": "web_search", "external_web_access": False}]
    adding = {"type": "additional_tools", "role": "developer", "tools": [{"type": "custom", "name": "note"}]}
    added = added_tools(items.checked_items([adding], "input"))
    with caplog.at_level("INFO", "modelport.service"):
        offered = client_tools(typed(tools), added, SERVED)
    names = [t["function"]["name"] for t in offered.chat]
    assert names == ["exec_command", "multi_agent_v1__close_agent", "apply_patch", "note"]
    assert "tools[3] (`web_search`) is not offered" in caplog.text
    patch = offered.chat[2]["function"]["parameters"]
    assert patch["required"] == ["input"]
    assert patch["properties"]["input"]["pattern"] == to_regex(APPLY_PATCH)
    assert "pattern" not in offered.chat[3]["function"]["parameters"]["properties"]["input"]
    assert offered.choice(ToolChoiceCustom(type="custom", name="apply_patch")) == {
        "type": "function",
        "function": {"name": "apply_patch"},
    }
    with pytest.raises(InvalidRequestError) as forced:
        offered.choice(ToolChoiceTypes(type="web_search_preview"))
    assert forced.value.param == "tool_choice"
    assert "does not run" in forced.value.message
    with pytest.raises(InvalidRequestError) as unknown:
        typed([{"type": "hologram"}])
    assert unknown.value.param == "tools[0].type"


def test_calls_come_back_as_their_kinds_items_and_events() -> None:
    offered = client_tools(typed([SHELL, NAMESPACE, CUSTOM]), [], SERVED)
    patch = "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n"
    chunks = [
        chunk({"role": "assistant", "content": None}),
        chunk(call(id="call_1", type="function", function={"name": "apply_patch", "arguments": '{"inp'})),
        chunk(call(function={"arguments": 'ut": ' + json.dumps(patch) + "}"})),
        chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                               "function": {"name": "multi_agent_v1__close_agent", "arguments": "{}"}}]}),
        chunk({}, finish_reason="tool_calls"),
        {**HEAD, "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}},
    ]  # fmt: skip
    builder = ResponseEvents(ResponseObject.model_validate(skeleton()), offered)
    built = builder.start()
    for piece in chunks:
        built += builder.feed(piece)
    built += builder.finish()

    async def sent() -> list[dict[str, Any]]:
        async def made() -> Any:
            for event in built:
                yield event

        return [event async for event in wire(made())]

    events = asyncio.run(sent())
    about_items = [e for e in events if "response" not in e]  # the lifecycle's are checked over HTTP
    assert not [found for e in about_items if (found := openresponses.problems(e, openresponses.EVENT))]
    kinds = [e["type"] for e in events]
    assert kinds[2:6] == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
    ]
    custom, function = builder.response.output
    assert custom.type == "custom_tool_call"
    assert (custom.input, custom.call_id) == (patch, "call_1")
    assert function.type == "function_call"
    assert (function.namespace, function.name) == ("multi_agent_v1", "close_agent")
    # Given back, each is the chat call the model made.
    given = [
        custom.to_dict(),
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done"},
        function.to_dict(),
        {"type": "function_call_output", "call_id": "call_2", "output": "closed"},
    ]
    chat = items.messages(items.checked_items(given, "input"))
    made_calls = chat[0]["tool_calls"]
    assert [c["function"]["name"] for c in made_calls] == ["apply_patch"]
    assert json.loads(made_calls[0]["function"]["arguments"]) == {"input": patch}
    assert chat[2]["tool_calls"][0]["function"]["name"] == "multi_agent_v1__close_agent"
    assert [m["role"] for m in chat] == ["assistant", "tool", "assistant", "tool"]
