"""The real chat templates of Gemma 2, Mistral 7B v0.2, Phi-3 mini and Llama 3.1, of families with call
syntaxes of their own (GLM 4.7 Flash, Mistral Small 3.2, Kimi K2, Granite 3.3, LFM2.5, Nemotron Nano 2,
MiniMax M2, DeepSeek V3.1 and V4 Flash, Gemma 4, Command R7B, Cohere's MoE, MiniCPM5, MiniMax M1 and M3,
GigaChat 3.0 and 3.1, Kimi K3, Hy3, Apriel 1.5 and 1.6, K2 Horizon and Solar Open) and of Apertus, whose
thinking llama.cpp reads (byte for byte; see templates/real/SOURCES.md): every request shape renders and
answers, the text each template ends a turn with ends generation and never shows, a call is written in the
family's own syntax and read back, each family is told the effort, and a conversation a template still
refuses is a 400 with the template's own words.

Each is served over the first four of SmolLM2's 30 blocks (`families.FIRST_BLOCKS`): what these tests check is
what the template, the grammar and the reader decide, which the weights' words never do (a call's numbers are
held to a digit each, so even its length is the grammar's), and such a model reads a prompt seven times as
fast (the module took 174 s on 2 cores over the whole model, 65 s over these blocks)."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from modelport.settings import Settings
from tests.support.faces import faces
from tests.support.families import ADD, DIGITS, FIRST_BLOCKS, repack

pytestmark = pytest.mark.slow  # 28 models with real templates

REAL = Path(__file__).parent / "templates" / "real"
TEMPLATES = {
    "gemma-2-9b-it": "<end_of_turn>",
    "mistral-7b-instruct-v0.2": "<|im_end|>",  # `eos_token`: SmolLM2's, under these weights
    "phi-3-mini-4k-instruct": "<|end|>",
    "llama-3.1-8b-instruct": "<|eot_id|>",
}
# Families whose templates show the tools in a call syntax of their own, and what the server reads it as.
NATIVE = {
    "glm-4.7-flash": "glm_xml",
    "mistral-small-3.2-24b-instruct-2506": "mistral_args",
    "kimi-k2-instruct": "kimi",
    "granite-3.3-2b-instruct": "granite",
    "lfm2.5-8b-a1b": "lfm2",
    "nvidia-nemotron-nano-v2": "nemotron",
    "minimax-m2": "minimax_xml",
    "deepseek-v4-flash": "deepseek_v4",
    "deepseek-v3.1": "deepseek_v31",  # its template is given the tools it does not show
    "gemma-4-31b-it": "gemma4",
    "command-r7b-12-2024": "cohere",
    "cohere2-moe": "cohere_text",
    "minicpm5-1b": "minicpm5",
    "minimax-m1": "minimax_m1",
    "gigachat3.1-10b-a1.8b": "gigachat",
    "gigachat3-10b-a1.8b": "gigachat_message",
    "minimax-m3": "minimax_m3",
    "kimi-k3": "kimi_k3",
    "tencent-hy3": "hy3",
    "apriel-1.6-15b-thinker": "apriel",
    "apriel-1.5": "apriel_framed",
    "ifm-k2-horizon": "k2_horizon",
    "solar-open-100b": "solar",
}
# The markers a family writes its text between: never the answer's content.
FRAMES = {
    "cohere": ("<|START_RESPONSE|>", "<|END_RESPONSE|>"),
    "cohere_text": ("<|START_TEXT|>", "<|END_TEXT|>"),
}
# A family whose thinking llama.cpp reads, steered by a variable of its template.
STEERED = "apertus-8b-instruct"
CALL = {"id": "call_abc123", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
SHAPES: dict[str, list[dict[str, Any]]] = {
    "a user": [{"role": "user", "content": "Name a colour."}],
    "a system message": [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Name a colour."},
    ],
    "two user messages in a row": [
        {"role": "user", "content": "Hello."},
        {"role": "user", "content": "Name a colour."},
    ],
    "an assistant first": [
        {"role": "assistant", "content": "How can I help?"},
        {"role": "user", "content": "Name a colour."},
    ],
    "a tool call and its result": [
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_abc123", "content": "5"},
    ],
}


def config(model: Path) -> str:
    models = [
        f'[[models]]\nid = "{name}"\nengine = "llamacpp"\npath = "{model}"\n'
        "n_parallel = 1\nn_ctx_per_slot = 2048\n"
        f"chat_template = {json.dumps((REAL / f'{name}.jinja').read_text())}\n"
        for name in [*TEMPLATES, *NATIVE, STEERED]
    ]
    return "defaults = false\n" + "".join(models)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = repack("smollm2", tmp_path_factory.mktemp("shallow"), layers=FIRST_BLOCKS)
    with faces(Settings.model_validate(tomllib.loads(config(model)))) as live:
        yield live.url


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("template", [*TEMPLATES, *NATIVE])
def test_every_request_shape_renders_and_answers(url: str, template: str, shape: str) -> None:
    reply = sdk(url).chat.completions.create(
        model=template,
        messages=SHAPES[shape],
        max_tokens=12,
        temperature=0,
        tools=[ADD] if "tool" in shape else None,
    )
    choice = reply.choices[0]
    # SmolLM2's weights under another family's template often end their turn at once, as the prompt
    # shows turns ending: an empty answer that stopped is an answer.
    assert choice.finish_reason in ("stop", "length", "tool_calls")
    assert TEMPLATES.get(template, "<|im_end|>") not in (choice.message.content or "")
    for marker in FRAMES.get(NATIVE.get(template, ""), ()):
        assert marker not in (choice.message.content or "")
    assert reply.usage is not None
    assert reply.usage.prompt_tokens > 0


@pytest.mark.parametrize("template", list(TEMPLATES))
def test_the_turns_end_ends_the_answer_and_never_shows(url: str, template: str) -> None:
    # The decoder is made to write the template's turn end in the middle of the answer.
    stop = TEMPLATES[template]
    pattern = "hello" + "".join(f"[{c}]" if c in "|<>" else c for c in stop) + " and more"
    for stream in (False, True):
        answer = sdk(url).chat.completions.create(
            model=template,
            messages=SHAPES["a user"],
            max_tokens=40,
            stream=stream,
            extra_body={"guided_regex": pattern},
        )
        if stream:
            chunks = list(answer)
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        else:
            text, finish = answer.choices[0].message.content, [answer.choices[0].finish_reason]
        assert text == "hello"
        assert finish == ["stop"]


@pytest.mark.parametrize("template", list(NATIVE))
def test_a_call_is_written_in_the_family_s_own_syntax_and_read_back(url: str, template: str) -> None:
    # Before, GLM's `<tool_call>` was taken for Hermes's (its calls held to JSON in tags) and Mistral Small
    # 3.2's `[TOOL_CALLS]NAME[ARGS]` for Nemo's list of calls.
    listed = httpx.get(f"{url}/v1/models/{template}", timeout=60).json()
    assert f"{NATIVE[template]} calls" in listed["chat_format"]
    asked = [{"role": "user", "content": "What is 2 + 3?"}]
    for stream in (False, True):
        reply = sdk(url).chat.completions.create(
            model=template, messages=asked, tools=[DIGITS], tool_choice="required", parallel_tool_calls=False,
            # GLM thinks, unless told; DeepSeek's `｜DSML｜` is many of SmolLM2's tokens at every tag
            max_tokens=300, temperature=0, stream=stream, reasoning_effort="none",
        )  # fmt: skip
        if stream:
            chunks = [c.choices[0] for c in reply if c.choices]
            pieces = [call for c in chunks for call in c.delta.tool_calls or []]
            name = "".join(p.function.name or "" for p in pieces if p.function)
            arguments = "".join(p.function.arguments or "" for p in pieces if p.function)
            finish = [c.finish_reason for c in chunks if c.finish_reason]
        else:
            (call,) = reply.choices[0].message.tool_calls or []
            name, arguments, finish = (
                call.function.name,
                call.function.arguments,
                [reply.choices[0].finish_reason],
            )
        assert name == "add"
        jsonschema.validate(json.loads(arguments), DIGITS["function"]["parameters"])
        assert finish == ["tool_calls"]
    # The call and its result given back render through the template (its arguments as an object).
    turns = [*asked, {"role": "assistant", "content": None, "tool_calls": [CALL]},
             {"role": "tool", "tool_call_id": CALL["id"], "content": "5"}]  # fmt: skip
    body = {"model": template, "messages": turns, "max_tokens": 1}
    (text,) = httpx.post(f"{url}/generate", json=body, timeout=60).json()["text"]
    written = {
        "glm_xml": "<tool_call>add<arg_key>a</arg_key><arg_value>2</arg_value>",
        "mistral_args": "[TOOL_CALLS]add",
        "kimi": '<|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>{"a": 2, "b": 3}',
        "granite": '<|tool_call|>[{"name": "add", "arguments": {"a": 2, "b": 3}}]',
        "lfm2": "<|tool_call_start|>[add(a=2, b=3)]<|tool_call_end|>",
        "nemotron": '<TOOLCALL>[{"name": "add", "arguments": {"a": 2, "b": 3}}]</TOOLCALL>',
        "minimax_xml": '<invoke name="add">',
        "deepseek_v4": '<｜DSML｜invoke name="add">',
        "deepseek_v31": '<｜tool▁call▁begin｜>add<｜tool▁sep｜>{"a": 2, "b": 3}<｜tool▁call▁end｜>',
        "gemma4": "<|tool_call>call:add{a:2,b:3}<tool_call|>",
        "cohere": '"tool_call_id": "0", "tool_name": "add", "parameters": {"a": 2, "b": 3}}',
        "cohere_text": '"tool_call_id": "0", "tool_name": "add", "parameters": {"a": 2, "b": 3}}',
        "minicpm5": '<function name="add"><param name="a">2</param><param name="b">3</param></function>',
        "minimax_m1": '<tool_calls>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_calls>',
        "gigachat": '<|function_call|>{"name": "add", "arguments": {"a": 2, "b": 3}}',
        "gigachat_message": "function call<|role_sep|>\n"
        '{"name": "add", "arguments": {"a": 2, "b": 3}}<|message_sep|>',
        "hy3": "<tool_call:opensource>add<tool_sep:opensource>\n<arg_key:opensource>a</arg_key:opensource>",
        "kimi_k3": '<|open|>call tool="add" index="1"<|sep|><|open|>argument key="a" type="number"<|sep|>2',
        "minimax_m3": '{ns}<invoke name="add">{ns}<a>2{ns}</a>{ns}<b>3{ns}</b>'.format(ns="]<]minimax[>["),
        "apriel": '<tool_calls>[{"name": "add", "arguments": {"a": 2, "b": 3}, "id": "call_abc123"}]',
        "apriel_framed": '{"name": "add", "arguments": {"a": 2, "b": 3}, "id": "call_abc123"}]</tool_calls>',
        "k2_horizon": "<ifm|tool_call>add\n<ifm|arg_key>a</ifm|arg_key>\n<ifm|arg_value>2</ifm|arg_value>",
        "solar": "<|tool_calls|><|tool_call:begin|>call_abc123<|tool_call:name|>add<|tool_call:args|>"
        '{"a": 2, "b": 3}<|tool_call:end|><|calls|>',
    }
    assert written[NATIVE[template]] in text


# Families told an effort by a variable of their template, and an effort that writes another prompt than
# `high`: what tells the two prompts apart is their length, or what of the one before each can reuse.
TOLD = {
    # A template whose thinking the engine reads: its `enable_thinking` took no effort before (`none` could
    # not turn it off); Apertus's writes "Deliberation: enabled" or "disabled", as many tokens.
    STEERED: "none",
    # Solar Open's `reasoning_effort` (its `low` and `minimal` write a turn of no thinking): before, not told.
    "solar-open-100b": "none",
    # K2 Horizon's tag of its thinking (`<ifm|think_faster>` at low), and Kimi K3's system message of its
    # `thinking_effort`: before, neither was told one.
    "ifm-k2-horizon": "low",
    "kimi-k3": "low",
}


@pytest.mark.parametrize("template", list(TOLD))
def test_a_family_s_template_is_told_the_effort(url: str, template: str) -> None:
    def prompt(effort: str) -> tuple[int, int]:
        """The prompt's tokens, and how many of them were reused."""
        asked = {"model": template, "messages": SHAPES["a user"], "max_tokens": 1, "temperature": 0}
        reply = sdk(url).chat.completions.create(**asked, reasoning_effort=effort)  # type: ignore[call-overload]
        assert reply.usage is not None
        assert reply.usage.prompt_tokens_details is not None
        return reply.usage.prompt_tokens, int(reply.usage.prompt_tokens_details.cached_tokens or 0)

    prompt("high")
    tokens, again = prompt("high")
    assert again > 0  # the same prompt, reused
    # Another prompt (the template wrote the effort into it): shorter or longer, or not all reused.
    other, reused = prompt(TOLD[template])
    assert other != tokens or reused < again


def test_a_required_call_comes_from_a_family_whose_thinking_the_engine_reads(url: str) -> None:
    # modelport's JSON answer leaves such a family no room to think; llama.cpp gave it back as thinking where
    # the prompt had opened one (Apriel 1.6's and K2 Horizon's, both read here since): no call came.
    for stream in (False, True):
        reply = sdk(url).chat.completions.create(
            model=STEERED, messages=[{"role": "user", "content": "What is 2 + 3?"}], tools=[DIGITS],
            tool_choice="required", parallel_tool_calls=False, max_tokens=120, temperature=0, stream=stream,
        )  # fmt: skip
        if stream:
            pieces = [p for c in reply if c.choices for p in c.choices[0].delta.tool_calls or []]
            arguments = "".join(p.function.arguments or "" for p in pieces if p.function)
        else:
            (call,) = reply.choices[0].message.tool_calls or []
            arguments = call.function.arguments
        jsonschema.validate(json.loads(arguments), DIGITS["function"]["parameters"])


# A family's thinking and answer as a grammar of the request's own writes them, and what is read of them.
WRITTEN = {
    # `<|end|>` ends Solar Open's turns, and its thinking's message before the answer's: it was a stop, so a
    # thinking answer ended with its thinking.
    "solar-open-100b": "<|think|>Add.<|end|><|begin|>assistant<|content|>Five.",
    # Apriel 1.5 writes its thinking itself, and frames its answer: both were the answer's text.
    "apriel-1.5": "Here are my reasoning steps: Add.[BEGIN FINAL RESPONSE]Five.[END FINAL RESPONSE]",
    # K2 Horizon told the default effort (medium) opens `<ifm|think_fast>`: its thinking ends at its closing.
    "ifm-k2-horizon": "Add.</ifm|think_fast>Five.",
}


@pytest.mark.parametrize("template", list(WRITTEN))
def test_a_family_s_thinking_and_answer_are_read_apart(url: str, template: str) -> None:
    pattern = "".join(f"\\{c}" if c in "[]" else f"[{c}]" if c in "|<>." else c for c in WRITTEN[template])
    for stream in (False, True):
        answer = sdk(url).chat.completions.create(
            model=template, messages=SHAPES["a user"], max_tokens=200, stream=stream,
            extra_body={"guided_regex": pattern},
        )  # fmt: skip
        if stream:
            deltas = [c.choices[0].delta for c in answer if c.choices]
            reasoning = "".join(getattr(d, "reasoning_content", None) or "" for d in deltas)
            text = "".join(d.content or "" for d in deltas)
        else:
            message = answer.choices[0].message
            reasoning, text = getattr(message, "reasoning_content", None) or "", message.content or ""
        assert (reasoning.strip(), text.strip()) == ("Add.", "Five.")


def test_kimi_k3_s_text_and_the_calls_after_it_are_both_read(url: str) -> None:
    # Its response's end, where its calls' section begins, is what its template ends a turn's text with: it
    # was a stop, so a model that wrote text before its calls ended with its text.
    o, c, sep = "<|open|>", "<|close|>", "<|sep|>"
    argument = f'{o}argument key="{{}}" type="number"{sep}{{}}{c}argument{sep}'
    call = f'{o}call tool="add" index="1"{sep}' + argument.format("a", 2) + argument.format("b", 3)
    written = f"Sure.{c}response{sep}{o}tools{sep}{call}{c}call{sep}{c}tools{sep}"
    for stream in (False, True):
        answer = sdk(url).chat.completions.create(
            model="kimi-k3", messages=SHAPES["a user"], tools=[ADD], max_tokens=200, stream=stream,
            reasoning_effort="none", extra_body={"guided_regex": re.escape(written)},
        )  # fmt: skip
        if stream:
            deltas = [chunk.choices[0].delta for chunk in answer if chunk.choices]
            text = "".join(d.content or "" for d in deltas)
            pieces = [p.function for d in deltas for p in d.tool_calls or [] if p.function]
            name = "".join(p.name or "" for p in pieces)
            calls = [(name, "".join(p.arguments or "" for p in pieces))] if pieces else []
        else:
            message = answer.choices[0].message
            text = message.content or ""
            calls = [(call.function.name, call.function.arguments) for call in message.tool_calls or []]
        assert (text, [(name, json.loads(arguments)) for name, arguments in calls]) == (
            "Sure.",
            [("add", {"a": 2, "b": 3})],
        )


@pytest.mark.parametrize(
    ("template", "given"),
    [("solar-open-100b", "<|begin|>assistant<|think|>Hm.<|end|>"), ("lfm2.5-8b-a1b", "<think>Hm.</think>")],
)
def test_a_turn_s_thinking_is_given_back_to_a_template_that_reads_it_by_another_name(
    url: str, template: str, given: str
) -> None:
    # Solar Open's template reads a message's thinking as `reasoning`, LFM2.5's as `thinking`; llama.cpp
    # hands a template `reasoning_content`: before, the thinking of a turn that called a tool was lost.
    turns = [SHAPES["a tool call and its result"][0],
             {**SHAPES["a tool call and its result"][1], "reasoning_content": "Hm."},
             SHAPES["a tool call and its result"][2]]  # fmt: skip
    body = {"model": template, "messages": turns, "max_tokens": 1}
    (text,) = httpx.post(f"{url}/generate", json=body, timeout=60).json()["text"]
    assert given in text


def test_llama_31_shows_tools_natively_and_tool_results_as_ipython(url: str) -> None:
    body = {
        "model": "llama-3.1-8b-instruct",
        "messages": SHAPES["a tool call and its result"],
        "max_tokens": 1,
    }
    (text,) = httpx.post(f"{url}/generate", json=body, timeout=60).json()["text"]
    assert '{"name": "add", "parameters": {"a": 2, "b": 3}}<|eot_id|>' in text
    # A string is `iterable` to Jinja, so this template writes a tool result as JSON: "5", quoted.
    assert '<|start_header_id|>ipython<|end_header_id|>\n\n"5"<|eot_id|>' in text
    reply = sdk(url).chat.completions.create(
        model="llama-3.1-8b-instruct",
        messages=SHAPES["a user"],
        tools=[ADD],
        tool_choice="required",
        max_tokens=40,
    )
    assert reply.choices[0].message.tool_calls
    assert reply.choices[0].message.tool_calls[0].function.name == "add"


@pytest.mark.parametrize("template", ["gemma-2-9b-it", "mistral-7b-instruct-v0.2"])
def test_a_system_message_is_folded_into_the_first_user_turn(url: str, template: str) -> None:
    body = {"model": template, "messages": SHAPES["a system message"], "max_tokens": 1}
    (text,) = httpx.post(f"{url}/generate", json=body, timeout=60).json()["text"]
    assert "Answer in one word." in text
    assert text.index("Answer in one word.") < text.index("Name a colour.")


def test_a_conversation_a_template_still_refuses_is_a_400_in_its_words(url: str) -> None:
    two_calls = {
        **SHAPES["a tool call and its result"][1],
        "tool_calls": [CALL, {**CALL, "id": "call_def456"}],
    }
    messages = [
        SHAPES["a user"][0],
        two_calls,
        {"role": "tool", "tool_call_id": "call_abc123", "content": "5"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(url).chat.completions.create(model="llama-3.1-8b-instruct", messages=messages, tools=[ADD])
    assert caught.value.body["code"] == "template_error"
    assert "This model only supports single tool-calls at once!" in caught.value.body["message"]
