"""A model's own format, without a model: what each family's template is read as, the grammar its answer is
held to (compiled and run by llguidance itself, over a tokenizer of bytes: what it accepts, what it refuses,
what it forces when a thinking budget is spent), and the readers that turn raw answers, in any chunking,
into OpenAI's deltas — off-format answers included."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import llguidance
import pytest

from modelport.errors import InvalidRequestError
from modelport.predictors.chat_format import PLAIN, ChatFormat, detect, shown_tools
from modelport.protocol.answers import listed
from modelport.service.generation import formats
from modelport.service.generation.formats import Body, effort
from modelport.service.generation.formats.json_answer import AnswerParser
from modelport.service.generation.formats.keyed import ValueScan
from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.pythonic import PythonicReader
from modelport.service.generation.formats.readers import Reader
from modelport.service.generation.formats.reading import read
from modelport.service.generation.formats.xml_values import ArgumentText
from modelport.service.generation.tools.plan import ToolPlan
from modelport.service.responses import items
from modelport.service.responses.sealing import Sealer
from tests.service.test_tool_formats import rebuild
from tests.support.jinja_templates import jinja_environment

TEMPLATES = Path(__file__).parent / "templates"
REAL = TEMPLATES / "real"
BYTES = llguidance.LLTokenizer("byte")
ADD = {
    "name": "add",
    "description": "Add two numbers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}, "note": {"type": "string"}},
        "required": ["a", "b"],
    },
}


def family(name: str, opened: bool = False) -> ChatFormat:
    """A test template's format (`real/NAME`: a model's own, byte for byte; given the tools where it shows
    none, as the engine does), its markers named by their bytes (as a vocabulary's tokens would be)."""
    form = detect(shown_tools((TEMPLATES / f"{name}.jinja").read_text()))
    form = dataclasses.replace(form, tokens=tuple((m, tuple(BYTES.tokenize_str(m))) for m in form.markers))
    if opened and form.thinking is not None:
        form = dataclasses.replace(form, thinking=dataclasses.replace(form.thinking, opened=True))
    return form


def opened_family(name: str, calls: str, marks: tuple[str, str]) -> ChatFormat:
    """The format of a family whose prompt opens its thinking, read as its call syntax and thinking marks."""
    form = family(name, opened=True)
    assert form.thinking is not None
    assert (form.calls, form.thinking.open, form.thinking.close) == (calls, *marks)
    return form


def named(marker: str) -> bytes:
    """A marker as llguidance shows the tokens it forces (`\\xff[id]` each)."""
    return b"".join(b"\xff[%d]" % token for token in BYTES.tokenize_str(marker))


def plan(required: bool = False) -> ToolPlan:
    return ToolPlan([ADD], required=required, parallel=True, legacy=False)


def held(
    form: ChatFormat, text: str, tools: ToolPlan | None = None, body: Body | None = None, **thinking: Any
) -> tuple[bool, bytes]:
    """Whether the grammar of an answer in `form` (held to `body`, where given) takes `text` whole (and may
    end there), and what it forces next."""
    shape = formats.shape(form, effort.plan(form, **{"effort": None, "max_tokens": 400, **thinking}), tools,
                          body, True, True)  # fmt: skip
    assert shape.grammar is not None
    grammar = llguidance.grammar_from("lark", shape.grammar)
    assert llguidance.LLMatcher.validate_grammar(grammar) == ""
    matcher = llguidance.LLMatcher(BYTES, grammar)
    tokens = BYTES.tokenize_str(text)
    taken = matcher.try_consume_tokens(tokens)
    return taken == len(tokens) and matcher.is_accepting(), bytes(matcher.compute_ff_bytes())


def test_each_familys_template_is_read_as_its_format() -> None:
    qwen3, r1, oss, coder = (detect((TEMPLATES / f"{n}.jinja").read_text()) for n in
                             ("qwen3", "deepseek-r1", "gpt-oss", "qwen3-coder"))  # fmt: skip
    assert (
        qwen3.calls,
        qwen3.thinking and qwen3.thinking.open,
        qwen3.thinking and qwen3.thinking.switch,
    ) == ("hermes", "<think>", "enable_thinking")
    assert r1.calls is None  # its template shows no tools: modelport describes them and holds its own JSON
    assert r1.thinking is not None
    assert r1.thinking.switch is None
    assert (oss.harmony, oss.calls) == (True, "harmony")
    assert oss.thinking is not None
    assert oss.thinking.effort == "reasoning_effort"
    assert (coder.calls, coder.thinking) == ("qwen3_xml", None)
    assert detect("{% for m in messages %}{{ m.content }}{% endfor %}") == PLAIN


def test_a_thinking_answer_is_held_to_think_then_answer() -> None:
    qwen3 = family("qwen3")
    assert held(qwen3, "<think>\nsums\n</think>\n\nFive.")[0]
    assert held(qwen3, "Five.")[0]  # a family that may skip its thinking
    assert held(qwen3, '<think>\nadd\n</think>\n\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}'
                       "\n</tool_call>", plan(required=True))[0]  # fmt: skip
    assert not held(qwen3, "<think>\nadd\n</think>\n\nFive.", plan(required=True))[0]  # a call is required
    assert not held(qwen3, '<tool_call>\n{"name": "add", "arguments": {"a": "two"}}', plan())[0]  # its schema


def test_a_spent_thinking_budget_forces_the_closing_marker() -> None:
    # `low` of 400 tokens is 100: a tokenizer of bytes counts each byte a token. The 101st is refused, and
    # the closing marker is what the grammar forces instead.
    taken, forced = held(family("deepseek-r1", opened=True), "x" * 120, effort="low")
    assert not taken
    assert forced == named("</think>")
    taken, forced = held(family("gpt-oss"), "<|channel|>analysis<|message|>" + "x" * 120, effort="low")
    assert not taken
    assert forced.startswith(named("<|end|>") + named("<|start|>") + b"assistant")
    assert held(family("deepseek-r1", opened=True), "x" * 99 + "</think>\n\nFive.", effort="low")[0]


def test_effort_none_closes_a_thinking_the_prompt_opened_at_once() -> None:
    r1 = family("deepseek-r1", opened=True)
    assert held(r1, "</think>\n\nFive.", effort="none")[0]
    assert not held(r1, "sums</think>Five.", effort="none")[0]
    assert not held(family("gpt-oss"), "<|channel|>analysis<|message|>hm<|end|>", effort="none")[0]


def test_harmony_answers_are_held_to_their_channels() -> None:
    oss = family("gpt-oss")
    final = "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Five."
    call = '<|channel|>commentary to=functions.add <|constrain|>json<|message|>{"a": 2, "b": 3}'
    # Each ends with the marker that stops generation, which the grammar forces once the answer is whole.
    assert held(oss, final + "<|return|>")[0]
    assert held(oss, call, plan(required=True))[1] == named("<|call|>")
    assert held(oss, call + "<|call|>", plan(required=True))[0]
    assert not held(oss, final + "<|return|>", plan(required=True))[0]
    assert not held(oss, "Five.")[0]


def test_qwen3_coder_calls_are_held_to_each_parameters_type() -> None:
    coder = family("qwen3-coder")
    call = "<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n<parameter=b>\n3.5\n</parameter>\n"
    note = "<parameter=note>\nany </par text\n</parameter>\n"
    assert held(coder, call + note + "</function>\n</tool_call>", plan(required=True))[0]
    assert held(coder, call + "</function>\n</tool_call>", plan(required=True))[0]  # `note` is optional
    assert not held(coder, call.replace("3.5", "three"), plan(required=True))[0]


GLM_CALLS = {  # as GLM 4.6's template writes a call, and as 4.7's (no line breaks)
    "real/glm-4.6": "<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>2</arg_value>\n"
    "<arg_key>b</arg_key>\n<arg_value>3.5</arg_value>\n</tool_call>",
    "real/glm-4.7-flash": "<tool_call>add<arg_key>a</arg_key><arg_value>2</arg_value>"
    "<arg_key>b</arg_key><arg_value>3.5</arg_value></tool_call>",
}


@pytest.mark.parametrize("name", list(GLM_CALLS))
def test_glm_calls_are_held_to_each_arguments_type_and_read_back(name: str) -> None:
    # GLM's templates write `<tool_call>`, which was read as Hermes's: its calls were held to JSON in tags.
    glm = family(name)
    assert glm.calls == "glm_xml"
    assert glm.thinking is not None
    assert glm.thinking.open == "<think>"
    call = GLM_CALLS[name]
    note = call.replace(
        "</tool_call>", "<arg_key>note</arg_key><arg_value>any </arg text</arg_value></tool_call>"
    )
    assert held(glm, call, plan(required=True))[0]
    assert held(glm, note, plan(required=True))[0]
    assert held(glm, f"{call}\n{call}", plan(required=True))[0]  # parallel calls
    assert not held(glm, call.replace("3.5", "three"), plan(required=True))[0]
    assert not held(glm, call.replace("<arg_key>a</arg_key>", "<arg_key>z</arg_key>"), plan(required=True))[0]
    assert held(glm, "Five.", plan())[0]
    for size in (1, 3, 1000):
        shape = formats.shape(glm, effort.plan(glm, None, 400), plan(), None, True, False)
        read = read_all(shape.read(), f"<think>sum</think>Sure.{note}\n{call}", size)
        assert (read["reasoning"], read["content"], read["strayed"]) == ("sum", "Sure.", False)
        assert read["calls"] == [
            ("add", {"a": 2, "b": 3.5, "note": "any </arg text"}),
            ("add", {"a": 2, "b": 3.5}),
        ]


@pytest.mark.parametrize(
    ("name", "call"),
    [
        (
            "real/mistral-small-3.2-24b-instruct-2506",
            '[TOOL_CALLS]add[CALL_ID]a1b2c3d4e[ARGS]{"a": 2, "b": 3.5}',
        ),
        ("real/devstral-small-2507", '[TOOL_CALLS]add[ARGS]{"a": 2, "b": 3.5}'),
        ("real/ministral-3-14b-reasoning-2512", '[TOOL_CALLS]add[ARGS]{"a": 2, "b": 3.5}'),
    ],
)
def test_later_mistral_calls_are_a_name_and_its_arguments_held_and_read_back(name: str, call: str) -> None:
    # These templates write `[TOOL_CALLS]NAME[ARGS]{…}`, which was read as Nemo's list of calls.
    mistral = family(name)
    assert mistral.calls == "mistral_args"
    assert held(mistral, call, plan(required=True))[0]
    assert held(mistral, call + call, plan(required=True))[0]  # parallel calls, each with its opener
    assert not held(mistral, call.replace("3.5", '"three"'), plan(required=True))[0]
    assert not held(
        mistral, '[TOOL_CALLS][{"name": "add", "arguments": {"a": 2, "b": 3}}]', plan(required=True)
    )[0]
    assert held(mistral, "Five.", plan())[0]
    for size in (1, 3, 1000):
        shape = formats.shape(mistral, effort.plan(mistral, None, 400), plan(), None, True, False)
        read = read_all(shape.read(), f"Sure.{call}{call}", size)
        assert (read["content"], read["strayed"]) == ("Sure.", False)
        assert read["calls"] == [("add", {"a": 2, "b": 3.5})] * 2


def test_seed_oss_calls_are_qwen3_coder_s_in_its_own_tags_held_and_read_back() -> None:
    # Seed-OSS's template was taken for Qwen3-Coder's: its calls were held to `<tool_call>` and to line breaks
    # around each value, which it does not write.
    seed = family("real/seed-oss")
    assert seed.calls == "seed_xml"
    call = (
        "<seed:tool_call>\n<function=add>\n<parameter=a>2</parameter>\n<parameter=b>3.5</parameter>\n"
        "</function>\n</seed:tool_call>"
    )
    assert held(seed, call, plan(required=True))[0]
    assert not held(seed, call.replace("<seed:tool_call>", "<tool_call>"), plan(required=True))[0]
    assert not held(seed, call.replace("3.5", "three"), plan(required=True))[0]
    for size in (1, 3, 1000):
        shape = formats.shape(seed, effort.plan(seed, None, 400), plan(), None, True, False)
        read = read_all(shape.read(), f"Sure.{call}", size)
        assert (read["content"], read["calls"]) == ("Sure.", [("add", {"a": 2, "b": 3.5})])


def test_minimax_m3_calls_are_elements_after_its_namespace_token_nested_as_its_template_writes_them() -> None:
    # MiniMax M3's template writes each argument as an element named by its key (objects and lists as
    # elements inside it), every tag after `]<]minimax[>[`, and thinks in `<mm:think>` steered by
    # `thinking_mode`: before, its calls were held to modelport's JSON and its thinking left to llama.cpp.
    form = family("real/minimax-m3")
    assert (form.calls, form.read_here) == ("minimax_m3", True)
    assert form.thinking is not None
    assert (form.thinking.open, form.thinking.switch) == ("<mm:think>", "thinking_mode")
    ns = "]<]minimax[>["

    def element(key: str, value: object) -> str:
        return f"{ns}<{key}>{value}{ns}</{key}>"

    def block(*calls: str) -> str:
        return f"{ns}<tool_call>\n" + "".join(calls) + f"{ns}</tool_call>"

    def call(name: str, *arguments: str) -> str:
        return f'{ns}<invoke name="{name}">' + "".join(arguments) + f"{ns}</invoke>\n"

    required = plan(required=True)
    add = call("add", element("a", 2), element("b", 3))
    assert held(form, block(add), required, effort="none")[0]
    assert held(form, block(add, call("add", element("a", 4.5), element("b", -1))), required, effort="none")[
        0
    ]
    assert held(form, "<mm:think>Add.</mm:think>" + block(add), required)[0]
    assert held(form, "</mm:think>" + block(add), required)[0]  # no thinking, said by the closing marker
    assert not held(
        form, block(call("add", element("a", 2), element("b", "three"))), required, effort="none"
    )[0]
    assert not held(form, block(call("add", element("a", 2))), required, effort="none")[0]  # `b` is required
    # A number's digits are bounded: a model that does not know the format wrote ones to its last token.
    assert not held(
        form, block(call("add", element("a", "1" * 30), element("b", 3))), required, effort="none"
    )[0]
    assert held(form, "Five.", plan(), effort="none")[0]
    assert held(form, block(add), plan(), effort="none")[0]
    nested = ToolPlan([NESTED], required=True, parallel=False, legacy=False)
    point = element("point", element("x", 1) + element("y", 2))
    tags = element("tags", element("item", "a <b>") + element("item", "c, d"))
    assert held(form, block(call("draw", point, tags, element("shade", "dark"))), nested, effort="none")[0]
    assert held(form, block(call("draw", point)), nested, effort="none")[0]  # the optional ones left out
    assert not held(form, block(call("draw", element("point", element("y", 2)))), nested, effort="none")[0]
    assert not held(form, block(call("draw", point, element("shade", "grey"))), nested, effort="none")[0]
    both = ToolPlan([ADD, NESTED], required=False, parallel=True, legacy=False)
    answer = "<mm:think>Draw.</mm:think>Sure." + block(
        call("draw", point, tags, element("meta", '{"k": [1]}')),
        call("add", element("a", 2), element("b", 3)),
    )
    for size in (1, 5, 1000):
        read = read_all(
            formats.shape(form, effort.plan(form, None, 400), both, None, True, False).read(), answer, size
        )
        assert (read["reasoning"], read["content"], read["strayed"]) == ("Draw.", "Sure.", False)
        assert read["calls"] == [
            ("draw", {"point": {"x": 1, "y": 2}, "tags": ["a <b>", "c, d"], "meta": {"k": [1]}}),
            ("add", {"a": 2, "b": 3}),
        ]
    none, low = effort.plan(form, "none", 400), effort.plan(form, "low", 400)
    assert none is not None
    assert low is not None
    assert (none.variables, low.variables) == ({"thinking_mode": "disabled"}, {})  # thinking: its default


def test_deepseek_v3_1_is_shown_its_tools_in_its_model_card_s_words_and_calls_them_by_name() -> None:
    # DeepSeek V3.1's template writes calls given back, `NAME<｜tool▁sep｜>{…}`, but shows no tools (its model
    # card has the caller describe them): before, the tools were described in modelport's words and its JSON
    # held. Now its template is given them where its system prompt ends, in the card's words.
    text = (REAL / "deepseek-v3.1.jinja").read_text()
    assert (detect(text).calls, "tools" in text) == (None, False)  # as it comes
    shown = shown_tools(text)
    tool = {"type": "function", "function": ADD}
    prompt = jinja_environment().from_string(shown).render(
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        tools=[tool], add_generation_prompt=True, bos_token="<s>",
    )  # fmt: skip
    assert prompt.startswith("<s>Be brief.\n\n## Tools\nYou have access to the following tools:\n\n### add\n")
    assert f"Description: Add two numbers.\n\nParameters: {json.dumps(ADD['parameters'])}\n\n" in prompt
    assert "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n<｜tool▁calls▁begin｜>" in prompt
    assert "<s>Be brief.<｜User｜>" in jinja_environment().from_string(shown).render(
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        bos_token="<s>",
    )  # no tools, no description
    form = family("real/deepseek-v3.1")
    assert form.calls == "deepseek_v31"
    r1 = (TEMPLATES / "deepseek-r1.jinja").read_text()  # R1's calls, a type and a JSON block, are another's
    assert shown_tools(r1) == r1

    def call(a: object, b: object) -> str:
        return f"<｜tool▁call▁begin｜>add<｜tool▁sep｜>{json.dumps({'a': a, 'b': b})}<｜tool▁call▁end｜>"

    def calls(*written: str) -> str:
        return "<｜tool▁calls▁begin｜>" + "".join(written) + "<｜tool▁calls▁end｜>"

    required = plan(required=True)
    assert held(form, calls(call(2, 3)), required, effort="none")[0]
    assert held(form, calls(call(2, 3), call(4.5, -1)), required, effort="none")[0]
    assert not held(form, calls(call(2, "three")), required, effort="none")[0]
    assert not held(
        form, calls("<｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n```json\n{}"), required, effort="none"
    )[0]
    assert held(form, "Five.", plan(), effort="none")[0]
    for size in (1, 5, 1000):
        read = read_all(
            formats.shape(form, None, plan(), None, True, False).read(),
            "Sure." + calls(call(2, 3), call(4.5, -1)),
            size,
        )
        assert (read["content"], read["strayed"]) == ("Sure.", False)
        assert read["calls"] == [("add", {"a": 2, "b": 3}), ("add", {"a": 4.5, "b": -1})]


def test_kimi_k3_calls_follow_its_response_in_a_tools_section_of_xtml_tags() -> None:
    # Kimi K3's template writes every section between `<|open|>NAME<|sep|>` and `<|close|>NAME<|sep|>`: its
    # thinking, its response (opened by the prompt when it does not think), then its calls: before, its
    # thinking was llama.cpp's and its calls held to modelport's JSON.
    form = family("real/kimi-k3", opened=True)
    assert (form.calls, form.read_here, form.frame_opened) == ("kimi_k3", True, True)
    assert form.thinking is not None
    assert form.thinking.switch == "thinking"
    o, c, sep = "<|open|>", "<|close|>", "<|sep|>"

    def argument(key: str, kind: str, value: object) -> str:
        return f'{o}argument key="{key}" type="{kind}"{sep}{value}{c}argument{sep}'

    def call(index: int, *arguments: str) -> str:
        return f'{o}call tool="add" index="{index}"{sep}' + "".join(arguments) + f"{c}call{sep}"

    def response(text: str) -> str:
        return f"{o}response{sep}{text}{c}response{sep}"

    tools = (
        f"{o}tools{sep}" + call(1, argument("a", "number", 2), argument("b", "number", 3)) + f"{c}tools{sep}"
    )
    required = plan(required=True)
    assert held(form, response("") + tools, required, effort="none")[0]
    assert held(form, f"Add.{c}think{sep}" + response("") + tools, required)[0]
    # A required call comes first, as in every syntax: its response closed at once, as its template writes
    # a turn of calls alone. Before, text could come first, without end (a tiny model's never reached a call).
    assert not held(form, f"Add.{c}think{sep}" + response("Sure.") + tools, required)[0]
    assert not held(form, tools, required, effort="none")[0]
    assert not held(form, response("Five."), required, effort="none")[0]  # a call is required
    assert not held(form, response("") + tools.replace('"number"', '"string"', 1), required, effort="none")[0]
    assert not held(form, response("") + tools.replace(">3<", ">three<"), required, effort="none")[0]
    assert held(form, response("Five."), plan(), effort="none")[0]
    assert held(form, f"Five.{c}response{sep}", None, effort="none")[0]  # the prompt opened the response
    answer = f"Add.{c}think{sep}" + response("Sure.") + f"{o}tools{sep}" + call(1, argument("a", "number", 2),
             argument("b", "number", 3), argument("note", "string", "x <y>")) + f"{c}tools{sep}"  # fmt: skip
    for size in (1, 5, 1000):
        read = read_all(
            formats.shape(form, effort.plan(form, None, 400), plan(), None, True, False).read(), answer, size
        )
        assert (read["reasoning"], read["content"], read["strayed"]) == ("Add.", "Sure.", False)
        assert read["calls"] == [("add", {"a": 2, "b": 3, "note": "x <y>"})]


# OpenAI's efforts as templates that take words of their own are told them (None: the default, medium).
EFFORT_WORDS = {
    # Kimi K3's template refuses any but low, high and max: before, it was told none (its default, max).
    "real/kimi-k3": (
        "thinking_effort",
        {"none": "low", "low": "low", None: "high", "xhigh": "max", "max": "max"},
    ),
    # DeepSeek V4's writes its prompt for `max` (and V4 Flash's for `high`): before, `xhigh` wrote nothing.
    "real/deepseek-v4-flash": (
        "reasoning_effort",
        {"low": "low", None: "medium", "high": "high", "xhigh": "max"},
    ),
}


@pytest.mark.parametrize("name", list(EFFORT_WORDS))
def test_an_effort_is_told_in_the_words_its_family_s_template_takes(name: str) -> None:
    variable, words = EFFORT_WORDS[name]
    form = family(name)
    assert form.thinking is not None
    assert form.thinking.effort == variable
    told = {given: effort.plan(form, given, 400) for given in words}
    assert {given: plan.variables[variable] for given, plan in told.items() if plan} == words


def test_hy3_calls_are_glm_s_in_its_own_tags_and_its_effort_in_its_own_words() -> None:
    # Tencent Hy3's template writes GLM's calls with every tag after `:opensource`, in a block, and takes
    # `no_think`, `low` and `high` (opening the thinking in the prompt for the two): before, its thinking was
    # llama.cpp's, its effort never told (OpenAI's words it refuses), its calls held to modelport's JSON.
    form = family("real/tencent-hy3")
    assert (form.calls, form.read_here) == ("hy3", True)
    told = {given: effort.plan(form, given, 400) for given in ("none", "minimal", "low", "medium", "max")}
    assert {given: plan.variables["reasoning_effort"] for given, plan in told.items() if plan} == {
        "none": "no_think", "minimal": "no_think", "low": "low", "medium": "high", "max": "high",
    }  # fmt: skip

    def tag(name: str) -> str:
        return f"<{name}:opensource>"

    def call(a: object, b: object) -> str:
        key, value = (f"{tag(t)}{{}}{tag('/' + t)}\n" for t in ("arg_key", "arg_value"))
        arguments = "".join(key.format(k) + value.format(v) for k, v in (("a", a), ("b", b)))
        return f"{tag('tool_call')}add{tag('tool_sep')}\n{arguments}{tag('/tool_call')}\n"

    def block(*calls: str) -> str:
        return f"{tag('tool_calls')}\n" + "".join(calls) + tag("/tool_calls")

    required = plan(required=True)
    assert held(form, block(call(2, 3)), required, effort="none")[0]
    assert held(form, block(call(2, 3), call(4.5, -1)), required, effort="none")[0]
    assert not held(form, block(call(2, "three")), required, effort="none")[0]
    assert not held(form, call(2, 3), required, effort="none")[0]  # its block
    assert held(form, "Five.", plan(), effort="none")[0]
    # Told to think, the prompt opened the thinking: the answer begins inside it.
    assert held(form, f"Add.{tag('/think')}" + block(call(2, 3)), required, effort="low")[0]
    assert not held(form, f"{tag('think')}Add.{tag('/think')}" + block(call(2, 3)), required, effort="low")[0]
    answer = f"Add.{tag('/think')}Sure.\n" + block(call(2, 3), call(4.5, -1))
    for size in (1, 5, 1000):
        read = read_all(
            formats.shape(form, effort.plan(form, "high", 400), plan(), None, True, False).read(),
            answer,
            size,
        )
        assert (read["reasoning"], read["content"], read["strayed"]) == ("Add.", "Sure.\n", False)
        assert read["calls"] == [("add", {"a": 2, "b": 3}), ("add", {"a": 4.5, "b": -1})]
        off = read_all(
            formats.shape(form, effort.plan(form, "none", 400), plan(), None, True, False).read(),
            "Five.",
            size,
        )
        assert (off["reasoning"], off["content"]) == ("", "Five.")


NESTED = {
    "name": "draw",
    "parameters": {
        "type": "object",
        "properties": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
            },
            "tags": {"type": "array", "items": {"type": "string"}},
            "shade": {"type": "string", "enum": ["dark", "light"]},
            "meta": {"type": "object"},
        },
        "required": ["point"],
    },
}


def test_deepseek_calls_are_held_and_read_as_its_markers_write_them() -> None:
    markers = (
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁call▁begin｜>",
        "<｜tool▁sep｜>",
        "<｜tool▁call▁end｜>",
        "<｜tool▁calls▁end｜>",
    )
    form = ChatFormat(calls="deepseek", tokens=tuple((m, tuple(BYTES.tokenize_str(m))) for m in markers))
    call = '<｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n```json\n{"a": 2, "b": 3}\n```<｜tool▁call▁end｜>'
    answer = f"<｜tool▁calls▁begin｜>{call}<｜tool▁calls▁end｜>"
    assert held(form, answer, plan(required=True))[0]
    assert not held(form, answer.replace('"b": 3', '"b": "three"'), plan(required=True))[0]
    assert held(form, "Five.", plan())[0]
    for size in (1, 5, 1000):
        read = read_all(formats.shape(form, None, plan(), None, True, False).read(), f"Sure.{answer}", size)
        assert (read["content"], read["calls"]) == ("Sure.", [("add", {"a": 2, "b": 3})])


def test_kimi_calls_are_held_and_read_as_its_template_writes_them() -> None:
    # Kimi K2's template renders the tools and its calls `functions.NAME:INDEX` between markers of its own:
    # before, neither was read, and its tools were described as if the template showed none.
    form = family("real/kimi-k2-instruct")
    assert form.calls == "kimi"
    call = '<|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>{"a": 2, "b": 3}<|tool_call_end|>'
    answer = f"<|tool_calls_section_begin|>{call}<|tool_calls_section_end|>"
    assert held(form, answer, plan(required=True))[0]
    assert held(form, answer.replace(call, call + call.replace(":0", ":1")), plan(required=True))[0]
    assert not held(form, answer.replace('"b": 3', '"b": "three"'), plan(required=True))[0]
    assert not held(form, answer.replace("functions.add", "functions.sub"), plan(required=True))[0]
    assert held(form, "Five.", plan())[0]
    for size in (1, 5, 1000):
        two = answer.replace(call, call + call.replace(":0", ":1").replace("2", "4"))
        read = read_all(formats.shape(form, None, plan(), None, True, False).read(), f"Sure.{two}", size)
        assert (read["content"], read["calls"]) == (
            "Sure.",
            [("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 3})],
        )


def test_granite_calls_are_held_read_and_given_back_in_its_text() -> None:
    # Granite 3.3's template tells the model to answer `<|tool_call|>` and a list of calls, and shows a
    # message's text only: before, the tools were described again and held to modelport's JSON.
    form = family("real/granite-3.3-2b-instruct")
    assert form.calls == "granite"
    answer = '<|tool_call|>[{"name": "add", "arguments": {"a": 2, "b": 3}}]'
    assert held(form, answer, plan(required=True))[0]
    assert not held(form, answer.replace('"b": 3', '"b": "three"'), plan(required=True))[0]
    assert held(form, "Five.", plan())[0]
    for size in (1, 5, 1000):
        read = read_all(formats.shape(form, None, plan(), None, True, False).read(), answer, size)
        assert read["calls"] == [("add", {"a": 2, "b": 3})]
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
    given = [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "content": "5"}]
    said = formats.history(form, given)
    assert said[0] == {"role": "assistant", "content": answer}  # as the model wrote it
    assert said[1] == given[1]
    # Text given as parts is their text, not the list's Python form.
    parts = [{**given[0], "content": [{"type": "text", "text": "Sure."}]}]
    assert formats.history(form, parts)[0]["content"] == f"Sure.{answer}"


def test_nemotron_nano_2_calls_are_held_and_read_between_its_tags() -> None:
    # Nemotron Nano 2's template lists the calls between `<TOOLCALL>` and `</TOOLCALL>`: before, no syntax
    # was read there (the tools were described again and held to modelport's JSON).
    form = family("real/nvidia-nemotron-nano-v2")
    assert form.calls == "nemotron"
    # Its thinking is switched by `/no_think` in a message; the template reads no variable for it (its
    # `namespace(enable_thinking=true)` was taken for one, and `none` told it to a template that ignores it:
    # the thinking its prompt opens was then read as the answer). Nothing turns it off: closed at once.
    assert form.thinking is not None
    assert form.thinking.switch is None
    opened = family("real/nvidia-nemotron-nano-v2", opened=True)
    assert held(opened, "</think>Five.", plan(), effort="none")[0]
    assert not held(opened, "Five.", plan(), effort="none")[0]
    answer = '<TOOLCALL>[{"name": "add", "arguments": {"a": 2, "b": 3}}]</TOOLCALL>'
    assert held(form, answer, plan(required=True), effort="none")[0]
    assert not held(form, answer.removesuffix("</TOOLCALL>"), plan(required=True), effort="none")[0]
    assert not held(form, answer.replace('"b": 3', '"b": "three"'), plan(required=True), effort="none")[0]
    assert held(form, "Five.", plan(), effort="none")[0]
    two = answer.replace("}}]", '}}, {"name": "add", "arguments": {"a": 4, "b": 3}}]')
    for size in (1, 5, 1000):
        read = read_all(formats.shape(form, None, plan(), None, True, False).read(), f"Sure.\n{two}", size)
        assert (read["content"], read["calls"]) == (
            "Sure.",
            [("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 3})],
        )
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
    given = [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "content": "5"}]
    assert formats.history(form, given) == given  # the template writes them, whatever their ids


def test_k2_horizon_thinks_in_its_own_tags_and_calls_in_glm_s_after_its_prefix() -> None:
    # K2 Horizon's template writes GLM's calls with every tag after `ifm|`, in a block, and its prompt opens
    # `<ifm|think>`: before, llama.cpp read its thinking, so its calls could not be its own (the tools were
    # described again and modelport's JSON held).
    form = opened_family("real/ifm-k2-horizon", "k2_horizon", ("<ifm|think>", "</ifm|think>"))

    def call(a: object, b: object) -> str:
        arguments = "".join(
            f"<ifm|arg_key>{k}</ifm|arg_key>\n<ifm|arg_value>{v}</ifm|arg_value>\n"
            for k, v in (("a", a), ("b", b))
        )
        return f"\n<ifm|tool_call>add\n{arguments}</ifm|tool_call>"

    def block(*calls: str) -> str:
        return "<ifm|tool_calls>" + "".join(calls) + "\n</ifm|tool_calls>"

    required = plan(required=True)
    thought = "Add.</ifm|think>"  # at high effort (the template's default)
    assert held(form, thought + block(call(2, 3)), required, effort="high")[0]
    assert held(form, thought + block(call(2, 3), call(4.5, -1)), required, effort="high")[0]
    assert not held(form, thought + block(call(2, "three")), required, effort="high")[0]
    assert not held(form, thought + call(2, 3), required, effort="high")[0]  # its block
    assert not held(form, block(call(2, 3)), required, effort="high")[
        0
    ]  # the prompt opened it: its end first
    assert held(form, thought + "Five.", plan(), effort="high")[0]
    # Its effort is told in its words, and names the tag its prompt opens; nothing turns the thinking off:
    # told `none`, it is told its lowest, closed at once.
    for given, told, tag in [("xhigh", "high", "think"), (None, "medium", "think_fast"),
                             ("low", "low", "think_faster"), ("none", "low", "think_faster")]:  # fmt: skip
        thinking = effort.plan(form, given, 400)
        assert thinking is not None
        assert thinking.variables == {"reasoning_effort": told}
        end = f"</ifm|{tag}>"
        assert held(form, ("" if given == "none" else "Add.") + end + "Five.", plan(), effort=given)[0]
        if tag != "think":  # another's closing mark is text of the thinking
            assert not held(form, "Add.</ifm|think>Five.", plan(), effort=given)[0]
        answer = f"Add.{end}Sure.\n" + block(call(2, 3), call(4.5, -1))
        for size in (1, 5, 1000):
            read = read_all(formats.shape(form, thinking, plan(), None, True, False).read(), answer, size)
            assert (read["reasoning"], read["content"], read["strayed"]) == ("Add.", "Sure.\n", False)
            assert read["calls"] == [("add", {"a": 2, "b": 3}), ("add", {"a": 4.5, "b": -1})]
    assert held(form, "</ifm|think_faster>" + block(call(2, 3)), required, effort="none")[0]
    assert not held(form, "Add.</ifm|think_faster>" + block(call(2, 3)), required, effort="none")[0]
    # Its template refuses an assistant turn without thinking, and llama.cpp drops an empty one.
    given = [
        {"role": "assistant", "content": "Hi."},
        {"role": "assistant", "reasoning_content": "Hm.", "content": ""},
    ]
    assert [m.get("reasoning_content") for m in formats.history(form, given)] == [" ", "Hm."]


def test_solar_open_thinks_answers_and_calls_in_messages_of_their_own() -> None:
    # Solar Open writes its thinking, its text and its calls each as a message after `<|begin|>assistant`:
    # before, llama.cpp read its thinking, so its calls could not be its own (the tools were described
    # again and modelport's JSON held).
    form = family("real/solar-open-100b")
    assert form.calls == "solar"
    assert form.thinking is not None
    assert (form.thinking.open, form.thinking.close, form.thinking.opened) == (
        "<|think|>",
        "<|end|><|begin|>assistant",
        False,
    )

    def call(call_id: str, a: object, b: object) -> str:
        arguments = json.dumps({"a": a, "b": b})
        return (
            f"<|tool_call:begin|>{call_id}<|tool_call:name|>add<|tool_call:args|>{arguments}<|tool_call:end|>"
        )

    def calls(*written: str) -> str:
        return "<|tool_calls|>" + "".join(written) + "<|calls|>"

    thought, required = "<|think|>Add.<|end|><|begin|>assistant", plan(required=True)
    assert held(form, thought + calls(call("a1b2c3d4e5", 2, 3)), required)[0]
    assert held(form, calls(call("a1b2c3d4e5", 2, 3), call("0123456789", 4.5, -1)), required)[0]
    assert not held(form, thought + calls(call("a1b2c3d4e5", 2, "three")), required)[0]
    assert not held(form, thought + calls(call("A1B2C3D4E5", 2, 3)), required)[0]  # its ids' letters
    assert not held(form, thought + calls(call("a1b2c3d4e5", 2, 3)).removesuffix("<|calls|>"), required)[0]
    assert not held(form, thought + "<|content|>Five.", required)[0]  # a call is required
    assert held(form, thought + "<|content|>Five.", plan())[0]
    assert held(form, "<|content|>Five.<|end|>", plan())[0]
    assert not held(form, thought + "Five.", plan())[0]  # text is a message of its own
    # Its `reasoning_effort` takes no `none`: `minimal`, which writes a thinking closed at once in the
    # prompt; the answer then does not think.
    none = effort.plan(form, "none", 400)
    assert none is not None
    assert none.variables == {"reasoning_effort": "minimal"}
    assert held(form, "<|content|>Five.", plan(), effort="none")[0]
    assert not held(form, thought + "<|content|>Five.", plan(), effort="none")[0]
    answer = thought + calls(call("a1b2c3d4e5", 2, 3), call("0123456789", 4.5, -1))
    for size in (1, 5, 1000):
        read = read_all(formats.shape(form, None, plan(), None, True, False).read(), answer, size)
        assert (read["reasoning"], read["content"], read["strayed"]) == ("Add.", "", False)
        assert read["calls"] == [("add", {"a": 2, "b": 3}), ("add", {"a": 4.5, "b": -1})]
        said = read_all(
            formats.shape(form, None, plan(), None, True, False).read(),
            thought + "<|content|>Sure.<|end|>",
            size,
        )
        assert (said["reasoning"], said["content"], said["calls"]) == ("Add.", "Sure.", [])
    # Its template writes the calls of the history itself, with their ids.
    given = [{"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
              "function": {"name": "add", "arguments": "{}"}}]}]  # fmt: skip
    assert formats.history(form, given) == given


def test_apriel_1_6_thinks_in_words_its_prompt_opens_and_lists_its_calls_in_tags() -> None:
    # Apriel 1.6's prompt opens its thinking with "Here are my reasoning steps:", which ends at "[BEGIN FINAL
    # RESPONSE]"; its calls are a list in `<tool_calls>`. Before, llama.cpp read the thinking, so its calls
    # could not be its own: the tools were described again and modelport's JSON held.
    marks = ("Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]")
    form = opened_family("real/apriel-1.6-15b-thinker", "apriel", marks)
    call = '<tool_calls>[{"name": "add", "arguments": {"a": 2, "b": 3}}]</tool_calls>'
    thought = "The user asks for a sum.\n[BEGIN FINAL RESPONSE]\n"
    required = plan(required=True)
    assert held(form, thought + call, required)[0]
    assert not held(form, call, required)[0]  # the prompt opened the thinking: its end comes first
    assert not held(form, thought + call.replace('"b": 3', '"b": "three"'), required)[0]
    assert not held(form, thought + call.removesuffix("</tool_calls>"), required)[0]
    assert held(form, thought + "Five.", plan())[0]
    # Nothing turns its thinking off: told `none`, the grammar closes it at once.
    assert held(form, "[BEGIN FINAL RESPONSE]\n" + call, required, effort="none")[0]
    assert not held(form, thought + call, required, effort="none")[0]
    two = call.replace("}}]", '}}, {"name": "add", "arguments": {"a": 4, "b": 3}}]')
    for size in (1, 5, 1000):
        read = read_all(
            formats.shape(form, None, plan(), None, True, False).read(), f"{thought}Sure.\n{two}", size
        )
        assert (read["reasoning"], read["content"], read["calls"], read["strayed"]) == (
            "The user asks for a sum.\n",
            "Sure.",
            [("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 3})],
            False,
        )


def test_apriel_1_5_thinks_until_its_final_response_which_holds_its_calls() -> None:
    # Apriel 1.5 writes its thinking itself (its prompt opens none; it begins "Here are my reasoning steps:"),
    # then its final response between "[BEGIN FINAL RESPONSE]" and "[END FINAL RESPONSE]", its calls a list in
    # `<tool_calls>` there. Before, llama.cpp was left its thinking, and its calls (its list sits beside
    # `<tool_call>` in its template, once taken for Hermes's) were modelport's JSON.
    form = family("real/apriel-1.5")
    assert (form.calls, form.frame) == ("apriel_framed", ("[BEGIN FINAL RESPONSE]", "[END FINAL RESPONSE]"))
    assert form.thinking is not None
    assert form.thinking.opened  # all it writes before its final response is thinking
    call = '<tool_calls>[{"name": "add", "arguments": {"a": 2, "b": 3}}]</tool_calls>'
    thought = "Here are my reasoning steps:\nA sum.\n[BEGIN FINAL RESPONSE]"
    required = plan(required=True)
    assert held(form, thought + call + "[END FINAL RESPONSE]", required)[0]
    assert held(form, "A sum.[BEGIN FINAL RESPONSE]" + call, required)[0]
    assert not held(form, thought + call.replace('"b": 3', '"b": "three"'), required)[0]
    assert not held(form, thought + "Five.[END FINAL RESPONSE]", required)[0]  # a call is required
    assert not held(form, call, required)[0]  # its thinking's end comes first
    assert held(form, thought + "Five.[END FINAL RESPONSE]", plan())[0]
    assert not held(form, thought + "Five.[END FINAL RESPONSE] More.", plan())[0]  # nothing after its end
    assert held(form, "[BEGIN FINAL RESPONSE]" + call, required, effort="none")[0]  # closed at once
    two = call.replace("}}]", '}}, {"name": "add", "arguments": {"a": 4, "b": 3}}]')
    for size in (1, 5, 1000):
        read = read_all(
            formats.shape(form, None, plan(), None, True, False).read(),
            f"{thought}{two}[END FINAL RESPONSE]",
            size,
        )
        assert (read["reasoning"], read["content"], read["strayed"]) == ("A sum.\n", "", False)
        assert read["calls"] == [("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 3})]
        said = read_all(
            formats.shape(form, None, None, None, True, False).read(),
            f"{thought}\nFive.\n[END FINAL RESPONSE]",
            size,
        )
        assert (said["reasoning"], said["content"]) == ("A sum.\n", "Five.\n")


def test_minimax_m1_calls_are_json_lines_in_one_block_and_gigachat_s_one_object_or_message() -> None:
    # MiniMax M1's template asks for a JSON object a line in `<tool_calls>`, GigaChat 3.1's for one object
    # after `<|function_call|>`, GigaChat 3.0's for one as a message of its own (`function call`'s): before,
    # none was read (the tools described again, modelport's JSON held).
    m1, gigachat = family("real/minimax-m1"), family("real/gigachat3.1-10b-a1.8b")
    gigachat_3 = family("real/gigachat3-10b-a1.8b")
    assert (m1.calls, gigachat.calls, gigachat_3.calls) == ("minimax_m1", "gigachat", "gigachat_message")
    call = '{"name": "add", "arguments": {"a": 2, "b": 3}}'
    other = '{"name": "add", "arguments": {"a": 4, "b": 3}}'
    required = plan(required=True)
    answers = {
        "m1": (m1, f"<tool_calls>\n{call}\n</tool_calls>", f"<tool_calls>\n{call}\n{other}\n</tool_calls>"),
        "gigachat": (gigachat, f"<|function_call|>{call}", None),  # one call a message
        "gigachat 3.0": (gigachat_3, f"<|message_sep|>\n\nfunction call<|role_sep|>\n{call}", None),
    }
    for form, one, two in answers.values():
        assert held(form, one, required)[0]
        assert not held(form, one.replace('"b": 3', '"b": "three"'), required)[0]
        assert not held(form, call, required)[0]  # its marker first
        assert held(form, "Five.", plan())[0]
        assert not held(form, f"{one}{one}", required)[0]
        for size in (1, 5, 1000):
            read = read_all(
                formats.shape(form, None, plan(), None, True, False).read(), f"Sure.\n{two or one}", size
            )
            expected = [("add", {"a": 2, "b": 3})] + ([("add", {"a": 4, "b": 3})] if two else [])
            assert (read["content"], read["calls"], read["strayed"]) == ("Sure.", expected, False)
    assert held(m1, answers["m1"][2], required)[0]
    assert held(gigachat_3, "Five.<|message_sep|>", plan())[0]  # its text's message may end
    assert not held(gigachat_3, "Five.<|message_sep|>\n\nuser<|role_sep|>\nMore.", plan())[0]


# Families whose calls are `<invoke>` elements in a block: the block's tags, every tag's prefix, and whether a
# parameter says if its value is a string.
INVOKES = {
    "real/minimax-m2": ("minimax_xml", "minimax:tool_call", "", False),
    "real/deepseek-v3.2": ("deepseek_v32", "｜DSML｜function_calls", "｜DSML｜", True),
    "real/deepseek-v4-flash": ("deepseek_v4", "｜DSML｜tool_calls", "｜DSML｜", True),
}


@pytest.mark.parametrize("name", list(INVOKES))
def test_invoke_calls_are_held_and_read_in_their_family_s_block(name: str) -> None:
    # MiniMax M2's and DeepSeek V3.2's and V4's templates show the tools and their calls as `<invoke>`
    # elements in a block of their own: before, a syntax modelport did not write (the tools described again,
    # its JSON held).
    syntax, block_tag, p, typed = INVOKES[name]
    form = family(name)
    assert form.calls == syntax

    def parameter(key: str, value: object, string: bool = False) -> str:
        said = f' string="{"true" if string else "false"}"' if typed else ""
        return f'<{p}parameter name="{key}"{said}>{value}</{p}parameter>'

    def invoke(a: object, b: object, *more: str) -> str:
        arguments = "\n".join([parameter("a", a), parameter("b", b), *more])
        return f'<{p}invoke name="add">\n{arguments}\n</{p}invoke>'

    def block(*invokes: str) -> str:
        return f"<{block_tag}>\n" + "\n".join(invokes) + f"\n</{block_tag}>"

    required = plan(required=True)
    assert held(form, block(invoke(2, 3)), required, effort="none")[0]
    assert held(form, block(invoke(2, 3, parameter("note", "a sum", string=True))), required, effort="none")[
        0
    ]
    assert not held(form, block(invoke(2, "three")), required, effort="none")[0]
    assert not held(form, block(invoke(2, 3)).replace('"add"', '"sub"'), required, effort="none")[0]
    assert held(form, "Five.", plan(), effort="none")[0]
    two = block(invoke(2, 3), invoke(4.5, -1))
    assert held(form, two, required, effort="none")[0]
    for size in (1, 5, 1000):
        read = read_all(formats.shape(form, None, plan(), None, True, False).read(), f"Sure.\n{two}", size)
        assert (read["content"], read["calls"]) == (
            "Sure.",  # the line break before the calls is the format's
            [("add", {"a": 2, "b": 3}), ("add", {"a": 4.5, "b": -1})],
        )
        noted = block(invoke(2, 3, parameter("note", "it's <b>", string=True)))
        spaced = read_all(formats.shape(form, None, plan(), None, True, False).read(), f"\n\n{noted}", size)
        assert (spaced["content"], spaced["calls"]) == ("", [("add", {"a": 2, "b": 3, "note": "it's <b>"})])


def test_minicpm5_calls_are_elements_in_no_block_and_markup_in_cdata_is_text() -> None:
    # MiniCPM5's template shows its calls as `<function name=…><param name=…>` elements one after another,
    # a string holding markup wrapped in CDATA: before, the tools were described again, its JSON held.
    form = family("real/minicpm5-1b")
    assert form.calls == "minicpm5"

    def call(*parameters: tuple[str, object]) -> str:
        said = "".join(f'<param name="{key}">{value}</param>' for key, value in parameters)
        return f'<function name="add">{said}</function>'

    required = plan(required=True)
    assert held(form, call(("a", 2), ("b", 3)), required, effort="none")[0]
    assert held(form, call(("a", 2), ("b", 3)) * 2, required, effort="none")[0]
    assert held(form, call(("a", 2), ("b", 3), ("note", "<![CDATA[a\n<sum>]]>")), required, effort="none")[0]
    assert not held(form, call(("a", 2), ("b", "three")), required, effort="none")[0]
    assert not held(form, call(("a", 2)), required, effort="none")[0]  # `b` is required
    assert not held(form, "<tool_call>" + call(("a", 2), ("b", 3)), required, effort="none")[0]
    assert held(form, "Five.", plan(), effort="none")[0]
    answer = "<think>\nAdd.\n</think>\n\n" + call(("a", 2), ("b", 3), ("note", "<![CDATA[it's\n<b>]]>"))
    answer += call(("a", 4.5), ("b", -1), ("note", "plain"))
    for size in (1, 5, 1000):
        read = read_all(
            formats.shape(form, effort.plan(form, None, 400), plan(), None, True, False).read(), answer, size
        )
        assert (read["reasoning"], read["content"], read["strayed"]) == ("\nAdd.\n", "", False)
        assert read["calls"] == [
            ("add", {"a": 2, "b": 3, "note": "it's\n<b>"}),
            ("add", {"a": 4.5, "b": -1, "note": "plain"}),
        ]
        said = read_all(
            formats.shape(form, None, plan(), None, True, False).read(),
            "Sure.\n" + call(("a", 1), ("b", 2)),
            size,
        )
        assert (said["content"], said["calls"]) == ("Sure.", [("add", {"a": 1, "b": 2})])


LFM2 = ("real/lfm2-8b-a1b", "real/lfm2.5-instruct", "real/lfm2.5-8b-a1b")
SETTINGS = {
    "name": "set",
    "parameters": {
        "type": "object",
        "properties": {
            "on": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "config": {"type": "object"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["on"],
    },
}


@pytest.mark.parametrize("name", LFM2)
def test_lfm2_calls_are_held_and_read_as_the_python_its_templates_write(name: str) -> None:
    # LFM2's templates show the tools (between markers of their own, or in a plain list) and its calls are
    # a Python list between markers: before, no syntax was read there (the tools were described again and
    # held to modelport's JSON), and LFM2.5's template, which takes past thinking out, was left to llama.cpp.
    form = family(name)
    assert form.calls == "lfm2"
    assert form.read_here
    begin, end = "<|tool_call_start|>[", "]<|tool_call_end|>"
    required = plan(required=True)
    assert held(form, f"{begin}add(a=2, b=3){end}", required)[0]
    assert held(form, f"{begin}add(a=2, b=3, note='a sum'){end}", required)[0]
    assert held(form, f"{begin}add(a=2, b=3), add(a=4.5, b=-1){end}", required)[0]
    assert not held(form, f"{begin}add(a=2, b='three'){end}", required)[0]
    assert not held(form, f"{begin}add(b=3, a=2){end}", required)[0]  # the schema's order
    assert not held(form, f"{begin}add(a=2){end}", required)[0]  # `b` is required
    assert not held(form, f"{begin}sub(a=2, b=3){end}", required)[0]
    # A little whitespace before the calls, not a model's tokens' worth of it.
    assert held(form, f"\n\n{begin}add(a=2, b=3){end}", required)[0]
    assert not held(form, f"{' ' * 9}{begin}add(a=2, b=3){end}", required)[0]
    assert held(form, "Five.", plan())[0]
    settings = ToolPlan([SETTINGS], required=True, parallel=False, legacy=False)
    assert held(form, f'{begin}set(on=True, tags=["a"], config={{"x": 1}}, unit=\'celsius\'){end}', settings)[
        0
    ]
    assert not held(form, f"{begin}set(unit='celsius', on=False){end}", settings)[0]  # order again
    assert not held(form, f"{begin}set(on=true){end}", settings)[0]  # Python's `True`
    assert not held(form, f"{begin}set(on=True, unit='kelvin'){end}", settings)[0]


@pytest.mark.parametrize("size", [1, 5, 1000])
def test_lfm2_calls_read_back_as_openai_s_in_any_chunking(size: int) -> None:
    form = family("real/lfm2.5-8b-a1b")
    both = ToolPlan([ADD, SETTINGS], required=False, parallel=True, legacy=False)

    def read(text: str) -> dict[str, Any]:
        return read_all(formats.shape(form, None, both, None, True, False).read(), text, size)

    answer = (
        'Let me check.<|tool_call_start|>[add(a=2, b=3, note="it\'s \\"x\\"\\n"), '
        'set(on=True, tags=[\'a\', "b, c"], config={"enabled": True, "note": null}, unit=\'celsius\')]'
        "<|tool_call_end|>"
    )
    got = read(answer)
    assert (got["content"], got["strayed"]) == ("Let me check.", False)
    assert got["calls"] == [
        ("add", {"a": 2, "b": 3, "note": 'it\'s "x"\n'}),
        (
            "set",
            {"on": True, "tags": ["a", "b, c"], "config": {"enabled": True, "note": None}, "unit": "celsius"},
        ),
    ]
    # A value nested past Python's stack is its text, not a failure.
    deep = "[" * 3000 + "]" * 3000
    nested = read(f"<|tool_call_start|>[set(on=True, tags={deep})]<|tool_call_end|>")
    assert nested["calls"] == [("set", {"on": True, "tags": deep})]
    # Whitespace around the calls is no content.
    spaced = read("  \n\n<|tool_call_start|>[add(a=1, b=2)]<|tool_call_end|>\n")
    assert (spaced["content"], spaced["calls"]) == ("", [("add", {"a": 1, "b": 2})])
    # Text that is not a call stays text: a link's brackets, and a marker not followed by a list.
    assert read("See [the docs](https://example.com).")["content"] == "See [the docs](https://example.com)."
    strayed = read("<|tool_call_start|>not a call")
    assert (strayed["content"], strayed["calls"], strayed["strayed"]) == ("not a call", [], True)


def test_lfm2_calls_given_back_are_written_into_the_text_as_its_template_writes_them() -> None:
    # LFM2's and LFM2.5's small templates show a message's text and not its calls: a call given back would
    # have vanished from the conversation.
    form = family("real/lfm2-8b-a1b")
    arguments = json.dumps({"a": 2, "b": 3, "note": "it's", "flags": [True, None], "extra": {"k": True}})
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": arguments}}
    given = [
        {"role": "assistant", "content": "Sure.", "tool_calls": [call, call]},
        {"role": "tool", "content": "5"},
    ]
    said = formats.history(form, given)
    one = 'add(a=2, b=3, note="it\'s", flags=[True, None], extra={"k": true})'
    assert said[0] == {
        "role": "assistant",
        "content": f"Sure.<|tool_call_start|>[{one}, {one}]<|tool_call_end|>",
    }
    assert said[1] == given[1]
    # Arguments a client gave nested past Python's stack are written as no arguments, not a failure (nor
    # Granite's, written as they came).
    deep = {**call, "function": {"name": "add", "arguments": "[" * 100_000 + "]" * 100_000}}
    back = [{"role": "assistant", "content": None, "tool_calls": [deep]}]
    assert formats.history(form, back)[0]["content"] == "<|tool_call_start|>[add()]<|tool_call_end|>"
    assert formats.history(family("real/granite-3.3-2b-instruct"), back)[0]["content"].endswith(']]]"}]')


def test_gemma_4_thinks_in_its_channel_and_calls_in_its_notation() -> None:
    # Gemma 4's template writes its thinking in a `thought` channel and its calls in a notation of its own:
    # before, both were left to llama.cpp, and its tools described again and held to modelport's JSON.
    form = family("real/gemma-4-31b-it")
    assert (form.calls, form.read_here) == ("gemma4", True)
    assert form.thinking is not None
    assert (form.thinking.open, form.thinking.close, form.thinking.switch) == (
        "<|channel>thought",
        "<channel|>",
        "enable_thinking",
    )
    q = '<|"|>'
    call = "<|tool_call>call:add{a:2,b:3}<tool_call|>"
    required = plan(required=True)
    assert held(form, call, required, effort="none")[0]
    assert held(form, f"<|channel>thought\nAdd them.<channel|>{call}", required)[0]
    assert held(form, call.replace("b:3", f"b:3,note:{q}a sum{q}"), required, effort="none")[0]
    assert held(form, call + call.replace("a:2", "a:4.5"), required, effort="none")[0]
    assert not held(form, call.replace("b:3", f"b:{q}three{q}"), required, effort="none")[0]
    assert not held(form, call.replace("a:2,b:3", "b:3,a:2"), required, effort="none")[0]  # sorted keys
    assert not held(form, call.replace("add", "sub"), required, effort="none")[0]
    assert held(form, "Five.", plan(), effort="none")[0]
    settings = ToolPlan([SETTINGS], required=True, parallel=False, legacy=False)
    nested = f"config:{{mode:{q}fast{q},steps:[1,2]}},on:true,tags:[{q}a{q},{q}b, c{q}],unit:{q}celsius{q}"
    assert held(form, f"<|tool_call>call:set{{{nested}}}<tool_call|>", settings, effort="none")[0]
    assert not held(form, "<|tool_call>call:set{on:True}<tool_call|>", settings, effort="none")[0]
    both = ToolPlan([ADD, SETTINGS], required=False, parallel=True, legacy=False)
    noted = call.replace("b:3", f"b:3,note:{q}it, is: {{x}}{q}")
    second = f"<|tool_call>call:set{{{nested}}}<tool_call|>"
    answer = f"<|channel>thought\nAdd, then set.<channel|>Sure.\n{noted}{second}"
    deep = "[" * 3000 + "]" * 3000  # nested past Python's stack: its text, not a failure
    shape = formats.shape(form, effort.plan(form, None, 400), both, None, True, False)
    nested = read_all(shape.read(), f"<|tool_call>call:set{{on:true,tags:{deep}}}<tool_call|>", 1000)
    assert nested["calls"] == [("set", {"on": True, "tags": deep})]
    for size in (1, 5, 1000):
        shape = formats.shape(form, effort.plan(form, None, 400), both, None, True, False)
        read = read_all(shape.read(), answer, size)
        assert (read["reasoning"], read["content"], read["strayed"]) == ("\nAdd, then set.", "Sure.", False)
        config = {"mode": "fast", "steps": [1, 2]}
        assert read["calls"] == [
            ("add", {"a": 2, "b": 3, "note": "it, is: {x}"}),
            ("set", {"config": config, "on": True, "tags": ["a", "b, c"], "unit": "celsius"}),
        ]


M3_TAGS = (
    "<tool_call>\n",
    '<invoke name="add">',
    "<a>{a}",
    "</a>",
    "<b>{b}",
    "</b>",
    "</invoke>\n",
    "</tool_call>",
)
# A call of `add` (`{a}`, `{b}`: its numbers) in each syntax that writes a number bare, not as JSON does.
BARE_NUMBERS = {
    "qwen3-coder": "<tool_call>\n<function=add>\n<parameter=a>\n{a}\n</parameter>\n<parameter=b>\n{b}\n"
    "</parameter>\n</function>\n</tool_call>",
    "real/lfm2.5-8b-a1b": "<|tool_call_start|>[add(a={a}, b={b})]<|tool_call_end|>",
    "real/gemma-4-31b-it": "<|tool_call>call:add{{a:{a},b:{b}}}<tool_call|>",
    "real/minimax-m3": "".join(f"]<]minimax[>[{tag}" for tag in M3_TAGS),
}


@pytest.mark.parametrize("name", list(BARE_NUMBERS))
def test_a_number_s_bounds_hold_in_every_syntax_that_writes_it_bare(name: str) -> None:
    # Held by JSON's grammar, which says them. Before, Gemma 4's integer under bounds was any number
    # (SmolLM2's first layers wrote `1e-101`), and a number's bounds held only in JSON and MiniMax M3's.
    form, call = family(name), BARE_NUMBERS[name]
    digit = {"type": "integer", "minimum": 0, "maximum": 9}
    properties = {"a": digit, "b": {**digit, "type": "number"}}
    digits = {**ADD, "parameters": {"type": "object", "properties": properties, "required": ["a", "b"]}}
    bounded = ToolPlan([digits], required=True, parallel=False, legacy=False)
    assert held(form, call.format(a=2, b=2.5), bounded, effort="none")[0]
    for a, b in ((12, 3), ("1e-101", 3), (2.5, 3), (-1, 3), (2, 9.5), (2, -0.5)):
        assert not held(form, call.format(a=a, b=b), bounded, effort="none")[0], (a, b)


COHERE = {"real/command-r7b-12-2024": "cohere", "real/cohere2-moe": "cohere_text"}


@pytest.mark.parametrize("name", list(COHERE))
def test_cohere_calls_are_numbered_in_its_action_and_its_text_framed(name: str) -> None:
    # Cohere's templates list the calls between `<|START_ACTION|>` and `<|END_ACTION|>` and frame the text
    # (`<|START_RESPONSE|>`, or `<|START_TEXT|>`): before, the tools were described again and held to
    # modelport's JSON, and the frame's markers (special tokens, written as text when the thinking's are)
    # were the answer's content.
    form = family(name)
    assert (form.calls, form.read_here) == (COHERE[name], True)
    assert form.frame is not None
    opening, closing = form.frame
    call = '{"tool_call_id": "0", "tool_name": "add", "parameters": {"a": 2, "b": 3}}'
    action = f"<|START_ACTION|>[{call}]<|END_ACTION|>"
    thought = "<|START_THINKING|>Add them.<|END_THINKING|>"
    required = plan(required=True)
    assert held(form, action, required, effort="none")[0]
    assert held(form, thought + action, required)[0]
    assert not held(form, action.replace('"0"', '"first"'), required, effort="none")[0]
    assert not held(form, action.replace('"b": 3', '"b": "three"'), required, effort="none")[0]
    assert not held(form, action.replace("tool_name", "name"), required, effort="none")[0]
    assert not held(form, f"{opening}Five.{closing}", required, effort="none")[0]
    for tools in (plan(), None):
        assert held(form, f"{opening}Five.{closing}", tools, effort="none")[0]
        assert held(form, f"{thought}{opening}Five.{closing}", tools)[0]
        assert not held(form, "Five.", tools, effort="none")[0]  # its text is framed
    two = action.replace(
        "}}]", '}}, {"tool_call_id": "1", "tool_name": "add", "parameters": {"a": 4, "b": 3}}]'
    )
    legacy = ToolPlan([ADD], required=False, parallel=False, legacy=True)
    own = '{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}'
    for size in (1, 5, 1000):
        shape = formats.shape(form, effort.plan(form, None, 400), plan(), None, True, False)
        read = read_all(shape.read(), f"{thought}{two}", size)
        assert (read["reasoning"], read["content"], read["strayed"]) == ("Add them.", "", False)
        assert read["calls"] == [("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 3})]
        said = read_all(shape.read(), f"{thought}{opening}Five.{closing}", size)
        assert (said["content"], said["calls"], said["strayed"]) == ("Five.", [], False)
        # `functions` are answered in modelport's JSON, framed as the family frames its text.
        shape = formats.shape(form, effort.plan(form, None, 400), legacy, None, True, False)
        reader = shape.read()
        pieces = [p for part in chunked(f"{opening}{own}{closing}", size) for p in reader.feed(part)]
        pieces += reader.flush(cut=False)
        function = "".join(json.dumps(p["function_call"]) for p in pieces)
        assert (function.count('"name": "add"'), reader.calls, reader.strayed) == (1, 1, False)
    given = [{"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
              "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]}]  # fmt: skip
    assert formats.history(form, given) == given  # its templates number the calls themselves


def test_the_effort_turns_off_the_thinking_of_a_template_it_steers_alone() -> None:
    # Cohere's MoE template opens the thinking in its prompt unless `reasoning_effort` is `none`, and has no
    # other switch: `minimal` is told `none` too, and the grammar then closes no thinking the prompt closed.
    form = family("real/cohere2-moe", opened=True)
    answer = "<|START_TEXT|>Five.<|END_TEXT|>"
    for given in ("none", "minimal"):
        thinking = effort.plan(form, given, 400)
        assert thinking is not None
        assert (thinking.on, thinking.variables) == (False, {"reasoning_effort": "none"})
        assert held(form, answer, effort=given)[0]
        assert not held(form, "<|END_THINKING|>" + answer, effort=given)[0]
    assert held(form, "Sums.<|END_THINKING|>" + answer, effort="low")[0]


def chunked(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def read_all(reader: Reader, text: str, size: int) -> dict[str, Any]:
    """What a reader makes of `text` fed `size` characters at a time: the thinking, the content and the
    calls, whole."""
    pieces = [p for part in chunked(text, size) for p in reader.feed(part)] + reader.flush(cut=False)
    content, calls = rebuild(pieces)
    thought = "".join(p.get("reasoning_content", "") for p in pieces)
    return {"reasoning": thought, "content": content, "calls": calls, "strayed": reader.strayed}


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_readers_take_each_familys_answer_in_any_chunking(size: int) -> None:
    def reader(form: ChatFormat, tools: ToolPlan | None = None) -> Reader:
        return formats.shape(form, effort.plan(form, None, 400), tools, None, True, False).read()

    answer = (
        '<think>\nsums\n</think>\n\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    )
    qwen3 = read_all(reader(family("qwen3"), plan()), answer, size)
    assert (qwen3["reasoning"], qwen3["content"], qwen3["calls"]) == (
        "\nsums\n",
        "",
        [("add", {"a": 2, "b": 3})],
    )
    r1 = read_all(reader(family("deepseek-r1", opened=True)), "sums\n</think>\n\nFive.", size)
    assert (r1["reasoning"], r1["content"]) == ("sums\n", "Five.")
    answer = (
        "<|channel|>analysis<|message|>Add.<|end|><|start|>assistant"
        '<|channel|>commentary to=functions.add <|constrain|>json<|message|>{"a": 2, "b": 3}'
    )
    oss = read_all(reader(family("gpt-oss"), plan()), answer, size)
    assert (oss["reasoning"], oss["content"], oss["calls"]) == ("Add.", "", [("add", {"a": 2, "b": 3})])
    final = read_all(reader(family("gpt-oss")), "<|channel|>final<|message|>Five.", size)
    assert (final["reasoning"], final["content"]) == ("", "Five.")
    answer = (
        "<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n"
        "<parameter=note>\nsee <b>\n</parameter>\n</function>\n</tool_call>"
    )
    coder = read_all(reader(family("qwen3-coder"), plan()), answer, size)
    assert coder["calls"] == [("add", {"a": 2, "note": "see <b>"})]


@pytest.mark.parametrize("name", ["real/minicpm5-1b", "real/minimax-m3", "qwen3"])
def test_a_json_answer_after_the_thinking_begins_with_json_s_whitespace_only(name: str) -> None:
    # A regex's `\s` is any Unicode space: a JSON answer began with no-break spaces (SmolLM2's first blocks
    # under MiniCPM5's template, effort none), which no JSON parser takes.
    form = family(name)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    def body(g: Grammar) -> str:
        return g.json("answer", schema)

    closed = form.thinking.close if form.thinking is not None and form.thinking.opened else ""
    assert held(form, f'{closed}\n\n{{"n": 1}}', body=body, effort="none")[0]
    assert not held(form, f'{closed}\xa0\xa0{{"n": 1}}', body=body, effort="none")[0]


JSON_CALLS = {
    "qwen3": '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>',
    "real/mistral-small-3.2-24b-instruct-2506": '[TOOL_CALLS]add[ARGS]{"a": 2, "b": 3}',
}


@pytest.mark.parametrize("name", list(JSON_CALLS))
@pytest.mark.parametrize("space", [" \n", "\xa0", "\u3000\n"])
def test_whitespace_before_json_calls_is_the_format_s_and_a_text_answer_keeps_its_own(
    name: str, space: str
) -> None:
    # Before, it was the answer's content: a model of SmolLM2's first blocks wrote a no-break space before
    # a required call, and its message's content was that space (Mistral's, read a character at a time).
    form, call = family(name), JSON_CALLS[name]
    for size in (1, 1000):
        shape = formats.shape(form, effort.plan(form, "none", 400), plan(), None, True, False)
        read = read_all(shape.read(), space + call, size)
        assert (read["content"], read["calls"]) == ("", [("add", {"a": 2, "b": 3})])
        shape = formats.shape(form, effort.plan(form, "none", 400), plan(), None, True, False)
        assert read_all(shape.read(), f"Five.{space}", size)["content"] == f"Five.{space}"


@pytest.mark.parametrize("size", [1, 4, 1000])
def test_an_answer_that_strays_from_its_format_is_content_without_markers(size: int) -> None:
    async def run(form: ChatFormat, text: str) -> str:
        shape = formats.shape(form, effort.plan(form, None, 400), None, None, True, False)
        pieces = [
            {"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
            for p in chunked(text, size)
        ]
        pieces[-1]["choices"][0]["finish_reason"] = "stop"
        out = [c async for c in read(listed(pieces), shape.read, shape.markers)]
        deltas = [choice["delta"] for chunk in out for choice in chunk["choices"]]
        assert not any(d.get("reasoning_content") for d in deltas)
        return "".join(d.get("content") or "" for d in deltas)

    # harmony's markers where no channel opens them; a thinking tag after the answer began
    assert asyncio.run(run(family("gpt-oss"), "Five.<|end|> Six<|return|>")) == "Five. Six"
    assert asyncio.run(run(family("qwen3"), "Five. </think> <think>Six")) == "Five.  Six"


@pytest.mark.parametrize("size", [1, 5, 1000])
def test_a_json_answer_the_engine_read_as_thinking_is_the_answer(size: int) -> None:
    # Apriel's prompt opens its thinking, and llama.cpp gave modelport's held JSON back as thinking, after the
    # prompt's own opening: the call was lost (a required call answered with none).
    async def run() -> list[dict[str, Any]]:
        text = (
            'Here are my reasoning steps:\n{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}'
        )
        pieces = [
            {"choices": [{"index": 0, "delta": {"reasoning_content": p}, "finish_reason": None}]}
            for p in chunked(text, size)
        ]
        pieces[-1]["choices"][0]["finish_reason"] = "stop"
        reader = AnswerParser(legacy=False)
        return [c async for c in read(listed(pieces), lambda: reader, (), thought_is_answer=True)]

    deltas = [choice["delta"] for chunk in asyncio.run(run()) for choice in chunk["choices"]]
    assert not any(d.get("reasoning_content") for d in deltas)
    _, calls = rebuild(deltas)
    assert calls == [("add", {"a": 2, "b": 3})]


def test_reasoning_tokens_are_counted_as_they_are_read() -> None:
    async def run(effort_given: str) -> dict[str, Any]:
        form = family("deepseek-r1", opened=True)
        shape = formats.shape(form, effort.plan(form, effort_given, 400), None, None, True, False)
        pieces = ["thinking", " more", "</think>", "\n\n", "Five", "."]
        chunks = [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
        chunks[-1]["choices"][0]["finish_reason"] = "stop"
        chunks.append(
            {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 6, "total_tokens": 9}}
        )
        if effort_given == "none":
            chunks = chunks[2:]
        out = [c async for c in read(listed(chunks), shape.read, shape.markers, thinks=True)]
        return out[-1]["usage"]["completion_tokens_details"]

    assert asyncio.run(run("medium")) == {"reasoning_tokens": 3}  # the thinking, and its closing marker
    assert asyncio.run(run("none")) == {"reasoning_tokens": 0}  # a thinking closed at once said nothing


@pytest.mark.parametrize(
    ("given", "budget", "off"),
    [("none", 0, True), ("minimal", 0, True), ("low", 100, False), ("medium", 200, False), (None, 200, False),
     ("high", 300, False), ("max", 360, False)],
)  # fmt: skip
def test_effort_bounds_the_thinking_within_max_tokens(given: str | None, budget: int, off: bool) -> None:
    thinking = effort.plan(family("qwen3"), given, 400)
    assert thinking is not None
    assert (thinking.budget, not thinking.on) == (budget, off)
    assert thinking.variables == {"enable_thinking": not off}
    assert effort.plan(family("gpt-oss"), given, 400).variables["reasoning_effort"] in (
        "low",
        "medium",
        "high",
    )
    assert effort.plan(family("qwen3-coder"), given, 400) is None  # a model that does not think
    assert effort.plan(family("qwen3"), "low", 100_000).budget == 1024  # and each effort's ceiling


def test_a_family_whose_thinking_the_engine_reads_is_told_the_effort_given_only() -> None:
    apertus = family("real/apertus-8b-instruct")
    assert (apertus.foreign_thinking, apertus.foreign_switch) == (True, "enable_thinking")
    assert "steered by enable_thinking" in apertus.describe()
    assert effort.foreign(apertus, "none") == {"enable_thinking": False}
    assert effort.foreign(apertus, "high") == {"enable_thinking": True}
    assert effort.foreign(apertus, None) == {}  # the engine's default stands
    assert effort.foreign(family("qwen3"), "none") == {}  # read here: its plan tells it


@pytest.mark.parametrize(("given", "told"), [("none", 0), ("low", 100), ("high", 300)])
def test_a_family_that_takes_a_thinking_budget_is_told_the_effort_s(given: str, told: int) -> None:
    # Seed-OSS's template plans its thinking to a `thinking_budget` (0: none, -1: no bound); it was not told.
    seed = effort.plan(family("real/seed-oss"), given, 400)
    assert seed is not None
    assert seed.variables["thinking_budget"] == told
    assert seed.budget == told
    # It says "thinking" in its prose, and a switch of that name was read from it (it has none).
    assert family("real/seed-oss").thinking.switch is None  # type: ignore[union-attr]
    assert family("real/ministral-3-14b-reasoning-2512").thinking.switch is None  # type: ignore[union-attr]
    unbounded = effort.plan(family("real/seed-oss"), "medium", None)
    assert unbounded is not None
    assert unbounded.variables["thinking_budget"] == 4096  # the effort's own ceiling, with no max_tokens


def test_sealed_reasoning_opens_on_the_server_that_sealed_it_only(tmp_path: Path) -> None:
    ours, theirs = Sealer(tmp_path / "a"), Sealer(tmp_path / "b")
    sealed = ours.seal("I should add.")
    assert ours.open(sealed, "input[0].encrypted_content") == "I should add."
    assert Sealer(tmp_path / "a").open(sealed, "x") == "I should add."  # the key is kept in the folder
    for blob in (theirs.seal("I should add."), sealed[:-4] + "AAAA", "not a blob"):
        with pytest.raises(InvalidRequestError) as refused:
            ours.open(blob, "input[3].encrypted_content")
        assert refused.value.param == "input[3].encrypted_content"
    assert ours.rotate() == 2
    assert ours.open(sealed, "x") == "I should add."  # a blob sealed before the rotation still opens
    assert ours.open(ours.seal("new"), "x") == "new"


def test_reasoning_given_back_is_the_thinking_of_the_answer_it_led_to() -> None:
    turn = items.checked_items(
        [
            {"type": "message", "role": "user", "content": "Add 2 and 3."},
            {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Use add."}]},
            {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 2, "b": 3}'},
            {"type": "function_call_output", "call_id": "c1", "output": "5"},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "It is 5."}]},
            {"type": "message", "role": "assistant", "content": "Five."},
        ],
        "input",
    )
    chat = items.messages(turn)
    assert [m.get("reasoning_content") for m in chat] == [None, "Use add.", None, "It is 5."]
    assert chat[1]["tool_calls"][0]["function"]["name"] == "add"


WRITE = {
    "name": "write",
    "description": "Write a file.",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path", "text"],
    },
}
# A file's text with what may end a value early or be taken for a marker: quotes, escapes, brackets, and the
# beginnings of every syntax's closing quote or tag.
FILE = "\n".join(
    ['def f(x):\n    return "a\\tb" + x  # it\'s [1, (2)] {3} <| <|" </arg_val </param ]<]mini'] * 50
)
# Each syntax whose calls' values end at a closing quote or tag, a call of `write` as its family's template
# writes one: the file's text where `{}` stands.
LONG_VALUES = {
    "real/lfm2.5-8b-a1b": "<|tool_call_start|>[write(path='a.py', text={})]<|tool_call_end|>",
    "real/gemma-4-31b-it": '<|tool_call>call:write{{path:<|"|>a.py<|"|>,text:<|"|>{}<|"|>}}<tool_call|>',
    "real/glm-4.6": "<tool_call>write\n<arg_key>path</arg_key>\n<arg_value>a.py</arg_value>\n"
    "<arg_key>text</arg_key>\n<arg_value>{}</arg_value>\n</tool_call>",
    "qwen3-coder": "<tool_call>\n<function=write>\n<parameter=path>\na.py\n</parameter>\n"
    "<parameter=text>\n{}\n</parameter>\n</function>\n</tool_call>",
    "real/minimax-m2": '<minimax:tool_call>\n<invoke name="write">\n<parameter name="path">a.py</parameter>\n'
    '<parameter name="text">{}</parameter>\n</invoke>\n</minimax:tool_call>',
    "real/minimax-m3": ']<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="write">]<]minimax[>[<path>a.py'
    "]<]minimax[>[</path>]<]minimax[>[<text>{}]<]minimax[>[</text>]<]minimax[>[</invoke>\n"
    "]<]minimax[>[</tool_call>",
}


# MiniCPM5's, whose template writes a string in a CDATA section.
MINICPM5_CALL = (
    '<function name="write"><param name="path">a.py</param>'
    '<param name="text"><![CDATA[{}]]></param></function>'
)


@pytest.mark.parametrize("size", [1, 4, 7])
@pytest.mark.parametrize("name", [*LONG_VALUES, "real/minicpm5-1b"])
def test_a_value_as_long_as_a_file_reads_back_whole_in_any_chunking(name: str, size: int) -> None:
    """Each look at a value reads on from where the last stopped (64,000 characters of LFM2's call, four a
    piece, took 41 s of the serving thread when each piece read the value again from its start; GLM's and
    the `<invoke>` syntaxes', a time growing as the square of the value's length): where a piece ends inside
    an escape, a quote or a closing tag, the value still reads back whole."""
    written = repr(FILE) if "lfm2" in name else FILE
    reader = formats.shape(
        family(name), None, ToolPlan([WRITE], False, True, False), None, True, False
    ).read()
    got = read_all(reader, LONG_VALUES.get(name, MINICPM5_CALL).format(written), size)
    assert got["calls"] == [("write", {"path": "a.py", "text": FILE})]
    assert (got["content"], got["strayed"]) == ("", False)


def test_a_value_s_scan_and_its_closing_tag_s_search_read_each_piece_once() -> None:
    """What makes a long value's reading linear: the scan of a value written bare (LFM2's, Gemma 4's) stands
    where the text may still change after each look, and a value read up to its closing tag holds back no
    more than what may begin the tag (its text given out as it comes)."""
    scan = ValueScan(")", PythonicReader.quoting)
    text = "'it\\'s"
    assert scan.end(text) is None
    assert scan.at == len(text)
    assert scan.end(text + "\\") is None
    assert scan.at == len(text)  # the escape's second character is yet to come
    assert scan.end(text + "\\n', b=1)") == len(text) + 3  # the comma after the string
    argument, rest, given = ArgumentText("</arg_value>", {"type": "string"}), "", []
    pieces = chunked(FILE + "</arg_value>after", 5)
    while not (taken := argument.take(rest + pieces.pop(0)))[2]:
        given.append(taken[0])
        rest = taken[1]
        assert len(rest) < len("</arg_value>")  # held back: what may begin the tag
    assert json.loads("".join([*given, taken[0]])) == FILE
    assert taken[1] + "".join(pieces) == "after"
    assert len(json.loads("".join(given) + '"')) > len(FILE) - 32  # given out as it came


@pytest.mark.parametrize(
    "name",
    [
        "qwen3-coder",
        "real/glm-4.6",
        "real/minimax-m2",
        "real/minimax-m3",
        "real/minicpm5-1b",
        "real/gemma-4-31b-it",
        "real/lfm2.5-8b-a1b",
    ],
)
def test_a_free_text_argument_streams_as_it_is_written(name: str) -> None:
    """A string argument's text goes out as the model writes it, as OpenAI streams a call's arguments (a
    file an agent writes is seen being written), where it went out whole at its closing tag; an answer that
    ends within it (not cut at its length) closes the string and the arguments."""
    form = family(name)
    reader = formats.shape(form, None, ToolPlan([WRITE], False, True, False), None, True, False).read()
    call = LONG_VALUES.get(name) or MINICPM5_CALL
    half = FILE[: FILE.index("return", len(FILE) // 2) + 3]  # the model's answer ends here
    # LFM2's value is a Python string, escaped (its quotes, its backslashes and line breaks).
    whole, written = (repr(FILE), repr(half)[:-1]) if "lfm2" in name else (FILE, half)
    answer = call.format(whole).split(whole)[0] + written
    pieces = [p for part in chunked(answer, 7) for p in reader.feed(part)]
    arguments = "".join(c["function"]["arguments"] for p in pieces for c in p.get("tool_calls", []))
    assert arguments.startswith('{"path": "a.py", "text": "')
    assert len(json.loads(arguments + '"}')["text"]) > len(half) - 32
    _, calls = rebuild(pieces + reader.flush(cut=False))
    assert calls == [("write", {"path": "a.py", "text": half})]


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_an_lfm2_string_streamed_reads_its_escapes_as_the_whole_string_does(size: int) -> None:
    """LFM2's strings are Python's: an escape Python and JSON read alike goes out as it comes; from one they
    do not (`\\x41`, `\\u00e9`, octal, `\\/`: JSON's in a string JSON can read, Python's otherwise) the rest
    goes out at the string's end, as the whole string reads; one that is no Python escape, as written."""
    form = family("real/lfm2.5-8b-a1b")
    said = {
        "'it\\'s \"q\"'": 'it\'s "q"',
        "'x\\u00e9y'": "xéy",
        "'a\\x41b\\tc'": "aAb\tc",
        "'oct\\101'": "octA",
        '"j\\/son"': "j/son",  # JSON's
        "'p\\/y'": "p\\/y",  # Python's
        "'bad\\N{NOPE}'": "bad\\N{NOPE}",
    }
    for written, text in said.items():
        reader = formats.shape(form, None, ToolPlan([WRITE], False, True, False), None, True, False).read()
        answer = f"<|tool_call_start|>[write(path='a.py', text={written})]<|tool_call_end|>"
        assert read_all(reader, answer, size)["calls"] == [("write", {"path": "a.py", "text": text})], written
