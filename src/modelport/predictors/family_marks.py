"""Each family's marks as its chat template writes them, and the template variables and words that steer its
thinking: the thinking tags modelport reads, the markers of every call syntax, the markers some families
frame their text in, harmony's, and what tells each family's template apart (`chat_format` reads a template by
them).
"""

from __future__ import annotations

import re

CALL_SYNTAXES = (
    "hermes", "llama3", "mistral", "granite", "mistral_args", "qwen3_xml", "seed_xml", "glm_xml", "deepseek",
    "kimi", "harmony", "lfm2", "nemotron", "minimax_xml", "deepseek_v32", "deepseek_v4", "gemma4", "cohere",
    "cohere_text", "minicpm5", "minimax_m1", "gigachat", "gigachat_message", "minimax_m3", "kimi_k3", "hy3",
    "apriel", "apriel_framed", "k2_horizon", "solar", "deepseek_v31",
)  # fmt: skip

# (open, close) of the thinking tags modelport reads, as templates write them.
THINKING_TAGS = (
    ("<think>", "</think>"),
    ("[THINK]", "[/THINK]"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),
    ("◁think▷", "◁/think▷"),
    ("<seed:think>", "</seed:think>"),
    ("<|channel>thought", "<channel|>"),  # Gemma 4's thought channel
    ("<mm:think>", "</mm:think>"),  # MiniMax M3's
)
# Template variables that turn thinking off when false, in the order families adopted them; and those that
# take words instead, with the words for on and off (None: not told, the template's default stands).
SWITCHES = ("enable_thinking", "thinking", "thinking_mode")
SWITCH_WORDS = {"thinking_mode": (None, "disabled")}  # MiniMax M3's (its default, "adaptive", may think)
EFFORT = "reasoning_effort"
# Apriel 1.6's thinking, in words: its generation prompt opens it, and it ends where the answer begins.
APRIEL = ("Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]")
# Apriel 1.5's final response, which its template asks for in words (its prompt opens no thinking).
APRIEL_RESPONSE = ("[BEGIN FINAL RESPONSE]", "[END FINAL RESPONSE]")
# K2 Horizon's turns (its every tag after `ifm|`). Its `reasoning_effort` is high, medium or low (nothing
# turns its thinking off), and names its thinking's tag: `<ifm|think>` at high (its default).
K2_HORIZON = "<|ifm|im_start|>"
K2_HORIZON_EFFORT = (("none", "low"), ("minimal", "low"), ("xhigh", "high"), ("max", "high"))
K2_HORIZON_THINKING = (("medium", "think_fast"), ("low", "think_faster"))
# Kimi K3's `thinking_effort`: low, high or max (its default; the template refuses medium).
K3_EFFORT = "thinking_effort"
KIMI_K3_EFFORT = (("none", "low"), ("minimal", "low"), ("medium", "high"), ("xhigh", "max"))


def ifm_tag(name: str) -> str:
    """One of K2 Horizon's tags (`<ifm|tool_call>`; `/tool_call`: `</ifm|tool_call>`)."""
    closing = name.startswith("/")
    return f"<{'/' if closing else ''}ifm|{name.removeprefix('/')}>"


# GLM's tags, as the families that took up its calls in a block name them (Hy3, K2 Horizon).
GLM_TAGS = (
    "tool_calls",
    "/tool_calls",
    "tool_call",
    "/tool_call",
    "arg_key",
    "/arg_key",
    "arg_value",
    "/arg_value",
)
# Solar Open's messages: its generation prompt (which its template also writes, closed at once, to think
# not at all), its thinking's end, and its calls' markers (the section's opening and end, a call's head,
# name and arguments, and a call's end). Its `reasoning_effort` of `low` or `minimal` does not think; it
# takes no `none`.
SOLAR = "<|begin|>assistant<|think|>"
SOLAR_THINKING = ("<|think|>", "<|end|><|begin|>assistant")
SOLAR_EFFORT = (("none", "minimal"),)
SOLAR_CALLS = (
    "<|tool_calls|>",
    "<|calls|>",
    "<|tool_call:begin|>",
    "<|tool_call:name|>",
    "<|tool_call:args|>",
    "<|tool_call:end|>",
)
BUDGET = "thinking_budget"  # Seed-OSS's: the thinking's bound in tokens, 0 for none and -1 for no bound

# Harmony's markers (https://cookbook.openai.com/articles/openai-harmony).
HARMONY = {
    "start": "<|start|>",
    "end": "<|end|>",
    "message": "<|message|>",
    "channel": "<|channel|>",
    "constrain": "<|constrain|>",
    "return": "<|return|>",
    "call": "<|call|>",
}
DEEPSEEK = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
)
# DeepSeek V3.1's calls name the function where R1's and V3's name a type and write a JSON block after it. Its
# template writes calls given back but shows no tools: their description is the model card's, given where its
# system prompt ends (as vLLM's tool template for it does).
DEEPSEEK_JSON_BLOCK = "```json"
DEEPSEEK_V31_AT = "{{ bos_token }}{{ ns.system_prompt }}"
DEEPSEEK_V31_TOOLS = (
    r"{%- if tools %}{{ '\n\n## Tools\nYou have access to the following tools:\n\n' }}"
    r"{%- for tool in tools %}{{ '### ' + tool.function.name + '\nDescription: '"
    r" + (tool.function.description or '') + '\n\nParameters: '"
    r" + (tool.function.parameters | tojson) + '\n\n' }}"
    r"{%- endfor %}{{ 'IMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
    r"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>"
    r"{additional_tool_calls}<｜tool▁calls▁end｜>\n\nWhere:\n"
    r"- `tool_call_name` must be an exact match to one of the available tools\n"
    r"- `tool_call_arguments` must be valid JSON that strictly follows the tool\'s Parameters Schema\n"
    r"- For multiple tool calls, chain them directly without separators or spaces' }}{%- endif %}"
)
KIMI = (
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
)
# Kimi K3's XTML: every section of a message a tag between markers, `<|open|>NAME ATTRIBUTES<|sep|>` …
# `<|close|>NAME<|sep|>`.
XTML = ("<|open|>", "<|close|>", "<|sep|>")


def xtml_tag(name: str) -> tuple[str, str]:
    """The opening and closing of an XTML section without attributes."""
    return f"{XTML[0]}{name}{XTML[2]}", f"{XTML[1]}{name}{XTML[2]}"


# The markers a family writes its text between, where it frames it (an answer is that text, without them), by
# call syntax: Cohere's response (Command R7B, Command A) or text (its MoE models), Kimi K3's response.
FRAMES = {
    "cohere": ("<|START_RESPONSE|>", "<|END_RESPONSE|>"),
    "cohere_text": ("<|START_TEXT|>", "<|END_TEXT|>"),
    "kimi_k3": xtml_tag("response"),
    "solar": ("<|content|>", "<|end|>"),
    "apriel_framed": APRIEL_RESPONSE,
}
# Whose frame may be opened before the answer: by the prompt when it does not open the thinking (Kimi K3's),
# by the thinking's end (Apriel 1.5's).
OPENED_FRAMES = {"kimi_k3", "apriel_framed"}
# What ends a turn's text, after which an answer in the format may go on (a turn's end too): Solar Open's
# thinking is a message before its answer's, GigaChat 3.0's call one after its text's, and Kimi K3's calls a
# section after its response's.
GOES_ON = {"solar": "<|end|>", "gigachat_message": "<|message_sep|>", "kimi_k3": FRAMES["kimi_k3"][1]}
COHERE = ("<|START_ACTION|>", "<|END_ACTION|>")
# Hy3's template makes every tag with this suffix (`<tool_call:opensource>`): the code that says so, its tags.
HY3 = "set HYTK = ':opensource'"


def hy3_tag(name: str) -> str:
    """One of Hy3's tags (`<tool_call:opensource>`)."""
    return f"<{name}:opensource>"


HY3_EFFORT = (
    ("none", "no_think"),
    ("minimal", "no_think"),
    ("medium", "high"),
    ("xhigh", "high"),
    ("max", "high"),
)
CALL_MARKERS = {
    "hermes": ("<tool_call>", "</tool_call>"),
    "mistral": ("[TOOL_CALLS]",),
    "granite": ("<|tool_call|>",),
    "mistral_args": ("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"),
    "qwen3_xml": ("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>"),
    "seed_xml": (
        "<seed:tool_call>",
        "</seed:tool_call>",
        "<function=",
        "</function>",
        "<parameter=",
        "</parameter>",
    ),
    "glm_xml": ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
    "deepseek": DEEPSEEK,
    "deepseek_v31": DEEPSEEK,
    "kimi": KIMI,
    "harmony": tuple(HARMONY.values()),
    "lfm2": ("<|tool_call_start|>", "<|tool_call_end|>"),
    "nemotron": ("<TOOLCALL>", "</TOOLCALL>"),
    "apriel": ("<tool_calls>", "</tool_calls>"),
    "apriel_framed": ("<tool_calls>", "</tool_calls>", *APRIEL_RESPONSE),
    # An invocation's opening is named by its tokens too, as the block's end is: which of the two follows a
    # call is then told apart by tokens (`</parameter>` is not: free text ends lazily at its text).
    "minimax_xml": ("<minimax:tool_call>", "</minimax:tool_call>", '<invoke name="'),
    "deepseek_v32": ("<｜DSML｜function_calls>", "</｜DSML｜function_calls>", '<｜DSML｜invoke name="'),
    "deepseek_v4": ("<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>", '<｜DSML｜invoke name="'),
    "minicpm5": ('<function name="', "</function>", '<param name="', "</param>"),
    "minimax_m1": ("<tool_calls>", "</tool_calls>"),
    "gigachat": ("<|function_call|>",),
    # The end of a message, and of a role's name before it.
    "gigachat_message": ("<|message_sep|>", "<|role_sep|>"),
    # Every tag of its calls after its namespace token (a special token of its vocabulary); an invocation's
    # opening named by its tokens too, as the block's end is (which of the two follows is told by tokens).
    "minimax_m3": ("]<]minimax[>[", "<tool_call>", "</tool_call>", '<invoke name="'),
    "hy3": tuple(hy3_tag(name) for name in (*GLM_TAGS, "tool_sep")),
    "k2_horizon": tuple(ifm_tag(name) for name in GLM_TAGS),
    "kimi_k3": (
        *XTML,
        *FRAMES["kimi_k3"],
        *xtml_tag("tools"),
        '<|open|>call tool="',
        '<|open|>argument key="',
    ),
    # The turn's end after its calls (`<|tool_response>`) too: never an answer's text.
    "gemma4": ("<|tool_call>", "<tool_call|>", '<|"|>', "<|tool_response>"),
    # The end of its answer (`<|flush|>`, an end-of-generation token of its vocabulary) too: never text.
    "solar": (*SOLAR_CALLS, *FRAMES["solar"], "<|flush|>"),
    "cohere": (*COHERE, *FRAMES["cohere"]),
    "cohere_text": (*COHERE, *FRAMES["cohere_text"]),
}
# OpenAI's `xhigh` where a template's highest effort is `max` (DeepSeek V4's; its others write nothing).
XHIGH_AS_MAX = (("xhigh", "max"),)
HARMONY_EFFORT = (("none", "low"), ("minimal", "low"), ("xhigh", "high"), ("max", "high"))
# MiniCPM5's call and parameter elements, and the wrapper of its strings that hold markup.
MINICPM5 = ('<function name="', '<param name="', "<![CDATA[")
# LFM2's tool list between markers, LFM2.5's plain one, and the calls LFM2.5's larger template gives back.
LFM2 = ("<|tool_list_start|>", "List of tools: [", "<|tool_call_start|>")
# Words a template that thinks in markers modelport does not know would show; llama.cpp then reads it.
UNKNOWN_THINKING = re.compile(r"reasoning_content|thinking|<\|?[a-z_]*think", re.IGNORECASE)
