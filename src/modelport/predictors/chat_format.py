"""A chat model's own format, read from its chat template's text: the syntax its calls are written in (when
the template shows the tools itself), how it marks its thinking, and the template variables that steer that
thinking. modelport constrains and reads a model's answer by it (`service/generation/formats`); the
families' marks themselves are in `family_marks`.

Reasoning families, by the markers their templates write:
- tags around the thinking: `<think>…</think>` (Qwen3, QwQ, DeepSeek R1 and its distills, GLM 4.5, Granite
  3.3, SmolLM3), `[THINK]…[/THINK]` (Magistral), `<|START_THINKING|>…<|END_THINKING|>` (Command A
  Reasoning), `◁think▷…◁/think▷` (Kimi), `<seed:think>…</seed:think>` (Seed-OSS),
  `<|channel>thought…<channel|>` (Gemma 4), `<mm:think>…</mm:think>` (MiniMax M3); where the generation
  prompt already opens the tag (DeepSeek R1's distills, QwQ) every answer starts inside the thinking
  (`opened`, learnt by the engine from the rendered prompt);
- `<ifm|think>…</ifm|think>` (K2 Horizon), opened by its prompt; told a lower effort, its tag is
  `ifm|think_fast` (medium) or `ifm|think_faster` (low);
- words: Apriel 1.6's prompt opens its thinking with "Here are my reasoning steps:", which ends at
  "[BEGIN FINAL RESPONSE]"; Apriel 1.5 writes them itself (all it writes before the latter is its thinking),
  and ends its answer with "[END FINAL RESPONSE]";
- a message of its own: Solar Open's `<|think|>…<|end|>`, then `<|begin|>assistant` and its answer's message;
- harmony (gpt-oss): each message on a channel, the thinking on `analysis`, calls on `commentary`, the
  answer on `final`.

Call syntaxes:
- `hermes`: `<tool_call>{json}</tool_call>` (Qwen 2.5/3, Hermes); `minimax_m1`: a JSON call a line in
  `<tool_calls>` (MiniMax M1); `llama3`: the answer is one JSON call; `gigachat`: one after
  `<|function_call|>` (GigaChat 3.1); `gigachat_message`: one a message of its own, after `<|message_sep|>`
  and its role, `function call<|role_sep|>` (GigaChat 3.0);
- `mistral`: `[TOOL_CALLS][...]` (Mistral Nemo); `granite` the same after `<|tool_call|>` (Granite 3.x);
  `nemotron` the same between `<TOOLCALL>` and `</TOOLCALL>` (Nemotron Nano 2); `apriel` between
  `<tool_calls>` and `</tool_calls>` (Apriel 1.6); `apriel_framed` the same in its final response, which
  "[END FINAL RESPONSE]" ends (Apriel 1.5);
- `mistral_args`: `[TOOL_CALLS]NAME[ARGS]{…}` (Mistral Small 3.2, Devstral, Ministral 3);
- `qwen3_xml`: `<tool_call><function=NAME><parameter=K>…` (Qwen3-Coder, Qwen3.5, Nemotron 3); `seed_xml` the
  same in `<seed:tool_call>` (Seed-OSS);
- `glm_xml`: `<tool_call>NAME<arg_key>K</arg_key><arg_value>…` (GLM 4.5-4.7, Ling 3.0, Laguna); `hy3` the
  same with every tag after `:opensource`, in a `<tool_calls:opensource>` block (Tencent Hy3); `k2_horizon`
  with every tag after `ifm|`, in an `<ifm|tool_calls>` block (K2 Horizon);
- `minimax_xml`: `<minimax:tool_call><invoke name="NAME"><parameter name="K">…` (MiniMax M2); `deepseek_v32`
  and `deepseek_v4` the same after `｜DSML｜` (DeepSeek V3.2, V4);
- `minicpm5`: `<function name="NAME"><param name="K">…</param></function>` (MiniCPM5); `minimax_m3`: each
  argument an element, `NS<invoke name="NAME">NS<K>…NS</K>NS</invoke>` (MiniMax M3);
- `deepseek`: `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME` and a JSON block (DeepSeek R1/V3);
  `deepseek_v31`: `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}` (DeepSeek V3.1, whose template is given its
  tools: `shown_tools`);
- `kimi`: `<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}` (Kimi K2); `kimi_k3`: XTML
  sections, `<|open|>call tool="NAME" index="1"<|sep|><|open|>argument key="K" type="T"<|sep|>…` (Kimi K3);
- `lfm2`: `<|tool_call_start|>[NAME(KEY='value', …)]<|tool_call_end|>` (LFM2, LFM2.5);
- `gemma4`: `<|tool_call>call:NAME{KEY:<|"|>value<|"|>,…}<tool_call|>` (Gemma 4);
- `cohere`: `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": NAME, "parameters": {…}}]<|END_ACTION|>`, and
  text between `<|START_RESPONSE|>` and `<|END_RESPONSE|>` (Command R7B, Command A); `cohere_text` the same
  with text between `<|START_TEXT|>` and `<|END_TEXT|>` (Cohere's MoE models);
- `harmony`: `to=functions.NAME <|constrain|>json<|message|>{…}` (gpt-oss);
- `solar`: a message of calls, `<|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{…}
  <|tool_call:end|>…<|calls|>`, and text a message `<|content|>…` (Solar Open).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from modelport.predictors import family_marks as marks


@dataclass(frozen=True)
class ThinkingMarks:
    """How a model's thinking is marked in its text, and what steers it."""

    open: str
    close: str
    opened: bool = False  # the generation prompt writes `open`: every answer starts inside the thinking
    switch: str | None = None  # the template variable that turns thinking off when false
    on: object = True  # what the switch is told for thinking (None: nothing)
    off: object = False  # and for none
    # The template's words for the efforts it does not take as OpenAI names them (gpt-oss's, Hy3's).
    words: tuple[tuple[str, str], ...] = ()
    opens: bool = False  # the prompt opens the thinking whenever the effort lets it think (Hy3's)
    effort: str | None = None  # the template variable that takes the reasoning effort (low, medium, high)
    budget: str | None = None  # the template variable that takes the thinking's bound in tokens
    # The effort says how long the thinking is, never whether: no word of it turns the thinking off (K2
    # Horizon's).
    kept: bool = False
    # The thinking's tags by the effort's word told, where the word names them (K2 Horizon's `think_fast`).
    tagged: tuple[tuple[str, tuple[str, str]], ...] = ()

    @property
    def closable(self) -> bool:
        """Whether a template variable turns the thinking off: its switch, or its effort where it has no
        switch (`none` turns off the thinking of Cohere's MoE models, whose prompt opens it otherwise)."""
        return bool(self.switch or (self.effort and not self.kept))

    def told(self, word: str) -> ThinkingMarks:
        """The marks of a thinking whose template is told `word` for its effort."""
        tags = dict(self.tagged).get(word)
        return self if tags is None else replace(self, open=tags[0], close=tags[1])


@dataclass(frozen=True)
class ChatFormat:
    """A chat model's format: its call syntax (None: the template shows no tools, so modelport describes them
    and constrains its own JSON), its thinking (None: it does not think), whether the whole answer is in
    harmony's channels, which of its markers are single special tokens of the vocabulary (their text is
    written only when the engine is told to), and each marker's token ids in the vocabulary (a grammar names
    a marker by its tokens: a model then writes it as it learnt it, and a bound on the text before it can
    force it)."""

    calls: str | None = None
    thinking: ThinkingMarks | None = None
    harmony: bool = False
    special: frozenset[str] = field(default_factory=frozenset)
    tokens: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # The template shows thinking in a way modelport does not read: the engine's own parser reads it.
    foreign_thinking: bool = False
    # The variable that turns such a template's thinking off when false (Gemma 4's `enable_thinking`). One
    # that takes an effort is not told one: such templates refuse any but their own words for it.
    foreign_switch: str | None = None

    @property
    def markers(self) -> tuple[str, ...]:
        """Every marker of the format: never part of an answer's text."""
        found: list[str] = list(marks.CALL_MARKERS.get(self.calls or "", ()))
        if self.thinking is not None:
            found += [self.thinking.open, self.thinking.close]
            found += [tag for _, tags in self.thinking.tagged for tag in tags]
        return tuple(dict.fromkeys(found))

    @property
    def frame(self) -> tuple[str, str] | None:
        """The markers the family writes its text between (Cohere's), if it frames it."""
        return marks.FRAMES.get(self.calls or "")

    @property
    def goes_on(self) -> str | None:
        """The end of a message after which an answer may go on with another (Solar Open's `<|end|>`)."""
        return marks.GOES_ON.get(self.calls or "")

    @property
    def frame_opened(self) -> bool:
        """Whether the generation prompt may open the frame itself (Kimi K3's, when it does not think)."""
        return (self.calls or "") in marks.OPENED_FRAMES

    @property
    def read_here(self) -> bool:
        """Whether modelport reads the model's answer itself (the engine hands over its raw text): for a
        format of the model's own that modelport knows. A model with none (its answer is its text) is left
        to the engine, which continues an assistant message given last (a raw chat does not)."""
        return self != PLAIN and not self.foreign_thinking

    def describe(self) -> str:
        """One line for `modelport models` and `/v1/models`."""
        parts = [f"{self.calls} calls" if self.calls else "calls as modelport's JSON"]
        thinking = self.thinking
        if self.harmony:
            parts.append("thinks on harmony's analysis channel")
        elif thinking is not None:
            opened = ", opened by the prompt" if thinking.opened else ""
            parts.append(f"thinks in {thinking.open}…{thinking.close}{opened}")
        elif self.foreign_thinking:
            parts.append("thinking read by llama.cpp")
        steering = [
            name
            for name in (
                (thinking.switch, thinking.effort, thinking.budget) if thinking else (self.foreign_switch,)
            )
            if name
        ]
        if steering:
            parts.append("steered by " + " and ".join(steering))
        return "; ".join(parts)


PLAIN = ChatFormat()  # no format of its own: its answer is its text, its calls modelport's JSON


def detect(template: str) -> ChatFormat:
    """The format a chat template shows: its call syntax (only where it renders `tools` itself) and its
    thinking markers and variables."""
    if marks.HARMONY["channel"] in template and marks.HARMONY["message"] in template:
        analysis = ThinkingMarks(
            f"{marks.HARMONY['channel']}analysis{marks.HARMONY['message']}",
            marks.HARMONY["end"],
            effort=marks.EFFORT if marks.EFFORT in template else None,
            words=marks.HARMONY_EFFORT,
        )
        return ChatFormat("harmony", analysis, harmony=True)
    # Hy3's tags, each `<NAME:opensource>` (its effort its switch, in words of its own)
    if marks.HY3 in template:
        tags = (marks.hy3_tag("think"), marks.hy3_tag("/think"))
        return ChatFormat(
            call_syntax(template),
            ThinkingMarks(*tags, effort=marks.EFFORT, words=marks.HY3_EFFORT, opens=True),
        )
    if marks.K2_HORIZON in template:  # K2 Horizon's `<ifm|think>`, opened by its prompt (never turned off)
        tagged = tuple(
            (word, (marks.ifm_tag(tag), marks.ifm_tag(f"/{tag}"))) for word, tag in marks.K2_HORIZON_THINKING
        )
        horizon = ThinkingMarks(
            marks.ifm_tag("think"),
            marks.ifm_tag("/think"),
            effort=marks.EFFORT,
            words=marks.K2_HORIZON_EFFORT,
            kept=True,
            tagged=tagged,
        )
        return ChatFormat(call_syntax(template), horizon)
    if marks.SOLAR in template:  # Solar Open's thinking, a message of its own
        effort = marks.EFFORT if _variable(marks.EFFORT, template) else None
        return ChatFormat(
            call_syntax(template),
            ThinkingMarks(*marks.SOLAR_THINKING, effort=effort, words=marks.SOLAR_EFFORT),
        )
    # Apriel 1.6's thinking in words (never turned off)
    if all(marker in template for marker in marks.APRIEL):
        return ChatFormat(call_syntax(template), ThinkingMarks(*marks.APRIEL))
    # Apriel 1.5's: everything before its answer
    if all(marker in template for marker in marks.APRIEL_RESPONSE):
        return ChatFormat(call_syntax(template), ThinkingMarks(*marks.APRIEL, opened=True))
    if all(marker in template for marker in marks.XTML):  # Kimi K3's sections (its thinking is `think`)
        switch = "thinking" if _variable("thinking", template) else None
        effort = marks.K3_EFFORT if _variable(marks.K3_EFFORT, template) else None
        return ChatFormat(
            call_syntax(template),
            ThinkingMarks(*marks.xtml_tag("think"), switch=switch, effort=effort, words=marks.KIMI_K3_EFFORT),
        )
    thinking: ThinkingMarks | None = None
    for open_tag, close_tag in marks.THINKING_TAGS:
        # The closing marker alone is enough: a template that takes past thinking out of the history (LFM2.5's
        # `split("</think>")`) says its model's answers hold it.
        if close_tag in template:
            switch = next((name for name in marks.SWITCHES if _variable(name, template)), None)
            effort = marks.EFFORT if _variable(marks.EFFORT, template) else None
            budget = marks.BUDGET if _variable(marks.BUDGET, template) else None
            on, off = marks.SWITCH_WORDS.get(switch or "", (True, False))
            words = marks.XHIGH_AS_MAX if effort and "'max'" in template and "xhigh" not in template else ()
            thinking = ThinkingMarks(
                open_tag, close_tag, False, switch, on, off, words=words, effort=effort, budget=budget
            )
            break
    foreign = thinking is None and bool(marks.UNKNOWN_THINKING.search(template))
    if not foreign:
        return ChatFormat(call_syntax(template), thinking)
    switch = next((name for name in marks.SWITCHES if _variable(name, template)), None)
    return ChatFormat(call_syntax(template), foreign_thinking=True, foreign_switch=switch)


def shown_tools(template: str) -> str:
    """A template that writes its family's calls but shows no tools, with the tools shown as its family is
    told them (DeepSeek V3.1's, in its model card's words where its system prompt ends); any other as is."""
    if (
        "tools" not in template
        and marks.DEEPSEEK[0] in template
        and marks.DEEPSEEK_JSON_BLOCK not in template
        and template.count(marks.DEEPSEEK_V31_AT) == 1
    ):
        return template.replace(marks.DEEPSEEK_V31_AT, marks.DEEPSEEK_V31_AT + marks.DEEPSEEK_V31_TOOLS)
    return template


def call_syntax(template: str) -> str | None:
    """The native call syntax a chat template renders, if it renders tools at all."""
    if "tools" not in template:
        return None
    if marks.HARMONY["channel"] in template and marks.HARMONY["message"] in template:
        return "harmony"
    if all(marker in template for marker in marks.XTML):  # Kimi K3's `tools` section of `call` elements
        return "kimi_k3"
    if marks.HY3 in template:  # Hy3's GLM-like calls, every tag after `:opensource`
        return "hy3"
    # K2 Horizon's GLM-like calls (its default format), every tag after `ifm|`
    if marks.K2_HORIZON in template:
        return "k2_horizon"
    if marks.SOLAR in template:  # Solar Open's, a message of their own
        return "solar"
    if "<|tool_call>" in template and "<tool_call|>" in template:  # Gemma 4's `call:NAME{…}`
        return "gemma4"
    # MiniCPM5's, in no block (K2 Horizon's tools show both)
    if all(part in template for part in marks.MINICPM5):
        return "minicpm5"
    if "<function=" in template and "<parameter=" in template:  # Qwen3-Coder's XML calls, or Seed-OSS's
        return "seed_xml" if "<seed:tool_call>" in template else "qwen3_xml"
    if marks.DEEPSEEK[0] in template:  # R1's and V3's function calls of a type, or V3.1's named
        return "deepseek" if marks.DEEPSEEK_JSON_BLOCK in template else "deepseek_v31"
    if marks.KIMI[0] in template:
        return "kimi"
    if "<arg_key>" in template and "<tool_call>" in template:  # GLM's, before Hermes's `<tool_call>`
        return "glm_xml"
    if "<minimax:tool_call>" in template:  # MiniMax M2's `<invoke name=…>` in a block of its own
        return "minimax_xml"
    if "｜DSML｜" in template:  # DeepSeek V3.2's and V4's `<invoke name=…>`, every tag after `｜DSML｜`
        return "deepseek_v32" if "function_calls" in template else "deepseek_v4"
    if marks.COHERE[0] in template:  # Cohere's list of numbered calls, and its text between markers
        return "cohere_text" if marks.FRAMES["cohere_text"][0] in template else "cohere"
    if "]<]minimax[>[" in template:  # MiniMax M3's elements, each tag after its namespace token
        return "minimax_m3"
    # Apriel 1.6's list, its thinking read here
    if "<tool_calls>[" in template and marks.APRIEL[0] in template:
        return "apriel"
    # Apriel 1.5's
    if "<tool_calls>[" in template and all(marker in template for marker in marks.APRIEL_RESPONSE):
        return "apriel_framed"
    if "<invoke" in template or "<tool_calls>[" in template:
        # `<invoke name=…>` beside `<tool_call>` tags, a list of calls beside a thinking modelport does not
        # read: syntaxes modelport does not write, and not Hermes's (the tools are described and modelport's
        # JSON held)
        return None
    if "<tool_calls>" in template and "</tool_calls>" in template:  # MiniMax M1's JSON lines in one block
        return "minimax_m1"
    if "<|function_call|>" in template and "<|role_sep|>" in template:  # GigaChat 3.1's
        return "gigachat"
    if "'function call'" in template and "<|role_sep|>" in template:  # GigaChat 3.0's, a message of its own
        return "gigachat_message"
    if "<tool_call>" in template:  # Hermes 2 Pro, Qwen 2.5/3, and their many fine-tunes
        return "hermes"
    if "<TOOLCALL>" in template:  # Nemotron Nano 2: a list of calls between it and its closing tag
        return "nemotron"
    if "<|tool_call|>" in template:  # Granite 3.x: a list of calls after it, as Mistral Nemo's
        return "granite"
    if "[TOOL_CALLS]" in template:  # Mistral Nemo's list of calls, or a name and `[ARGS]` a call (later ones)
        return "mistral_args" if "[ARGS]" in template else "mistral"
    if any(marker in template for marker in marks.LFM2):
        return "lfm2"
    if "<|start_header_id|>" in template and '"parameters"' in template:  # Llama 3.1-3.3
        return "llama3"
    return None


def _variable(name: str, template: str) -> bool:
    """Whether the template reads `name` as a variable: in its code (`{% … %}`, `{{ … }}`), outside the
    strings there (Seed-OSS's prompt says "thinking" in prose, and reads no such variable), and not as the
    name of an argument it passes (Nemotron Nano 2's `namespace(enable_thinking=true)`: its thinking is
    switched by `/no_think` in a message, and it reads no such variable)."""
    code = " ".join(_STRING.sub('""', block) for block in _CODE.findall(template))
    return re.search(rf"(?<![\w.'\"]){re.escape(name)}\b(?!['\"]|\s*=[^=])", code) is not None


_CODE = re.compile(r"\{[{%](.*?)[%}]\}", re.DOTALL)
_STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'", re.DOTALL)
