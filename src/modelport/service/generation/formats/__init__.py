"""A model's own format at work on one request: the grammar its answer is held to (its thinking, bounded by
the effort's budget, then the answer: text, JSON, or calls in its syntax) and the reader that turns its raw
text into OpenAI's deltas (`reasoning_content`, `content`, `tool_calls`).

One module per call syntax (`json_calls`: hermes, minimax_m1, llama3, gigachat, gigachat_message, mistral,
granite, nemotron, apriel, apriel_framed, mistral_args, cohere, cohere_text; `qwen3_xml`; `glm_xml`: glm_xml,
hy3, k2_horizon; `invoke_xml`: minimax_xml, deepseek_v32, deepseek_v4, minicpm5; `deepseek` (deepseek,
deepseek_v31), `kimi` and `solar`, with `sections` for what calls in a section of their own share;
`xml_values` for the values of the XML ones; `pythonic`: LFM2's calls in Python; `gemma4`; `minimax_m3`;
`xtml`: kimi_k3), `harmony` for gpt-oss's channels, `readers` for text, thinking tags and markers, `effort`
for budgets, `lark` for writing grammars, `reading` for the stream. The syntaxes are found by name in
`SYNTAXES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from modelport.predictors.chat_format import ChatFormat, ThinkingMarks
from modelport.service.generation.formats import harmony
from modelport.service.generation.formats.deepseek import DeepSeek, DeepSeekV31
from modelport.service.generation.formats.effort import ThinkingPlan
from modelport.service.generation.formats.gemma4 import Gemma4
from modelport.service.generation.formats.glm_xml import HY3_TAGS, GlmXml, K2Horizon
from modelport.service.generation.formats.invoke_xml import DEEPSEEK_V4, DEEPSEEK_V32, MINICPM5, MINIMAX
from modelport.service.generation.formats.json_answer import AnswerParser
from modelport.service.generation.formats.json_calls import (
    Apriel,
    AprielFramed,
    Cohere,
    GigaChat,
    GigaChatMessage,
    Granite,
    Hermes,
    Llama3,
    MiniMaxM1,
    Mistral,
    MistralArgs,
    Nemotron,
)
from modelport.service.generation.formats.kimi import Kimi
from modelport.service.generation.formats.lark import ANY, Grammar, regex
from modelport.service.generation.formats.minimax_m3 import MiniMaxM3
from modelport.service.generation.formats.pythonic import Pythonic
from modelport.service.generation.formats.qwen3_xml import Qwen3Xml
from modelport.service.generation.formats.readers import Reader, TextReader, ThinkingReader, Unframed
from modelport.service.generation.formats.solar import Solar
from modelport.service.generation.formats.xtml import KIMI_K3
from modelport.service.generation.tools.plan import ToolPlan


class CallSyntax(Protocol):
    """How one family writes its calls: the grammar of an answer that follows a tool plan, the reader of
    such an answer, and the history its templates accept."""

    name: str
    arguments: str  # the key of a call's arguments, where calls are JSON

    def answer(self, plan: ToolPlan, grammar: Grammar, compact: bool) -> str: ...

    def reader(self, plan: ToolPlan) -> Reader: ...

    def history(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]: ...


_ALL = (
    Hermes(), Llama3(), Mistral(), MistralArgs(), Qwen3Xml(), Qwen3Xml(seed=True), GlmXml(), DeepSeek(),
    Kimi(), Granite(), Nemotron(), Pythonic(), MINIMAX, DEEPSEEK_V4, DEEPSEEK_V32,
    Gemma4(), Cohere("cohere"), Cohere("cohere_text"), MINICPM5, MiniMaxM1(), GigaChat(), GigaChatMessage(),
    MiniMaxM3(), KIMI_K3, GlmXml("hy3", HY3_TAGS), Apriel(), AprielFramed(), K2Horizon(),
    Solar(), DeepSeekV31(),
)  # fmt: skip
SYNTAXES: dict[str, CallSyntax] = {syntax.name: syntax for syntax in _ALL}


def history(form: ChatFormat, messages: list[dict[str, Any]], native: bool = True) -> list[dict[str, Any]]:
    """A conversation as the family's template takes it: harmony's channels, and where its calls and
    results are in the family's own syntax (`native`) that syntax's form of them (Mistral's templates refuse
    ids that are not of nine characters)."""
    syntax = SYNTAXES.get(form.calls or "") if native else None
    if syntax is not None:
        messages = syntax.history(messages)
    return harmony.history(messages) if form.harmony else messages


# The body of an answer: adds its rules to a grammar and names the one that holds it (None: free text).
Body = Callable[[Grammar], str | None]


@dataclass(frozen=True)
class Shape:
    """What one request's answer is held to (an llguidance grammar; None: nothing beyond the model's own
    will) and how it is read."""

    grammar: str | None
    read: Callable[[], Reader]
    markers: tuple[str, ...]


def native(form: ChatFormat, plan: ToolPlan | None) -> CallSyntax | None:
    """The call syntax a plan is answered in: the model's own, where its template shows the tools (and the
    request is not in the legacy `functions` shape, which modelport's JSON answers)."""
    if plan is None or plan.legacy or form.calls is None or form.harmony:
        return None
    return SYNTAXES.get(form.calls)


def shape(
    form: ChatFormat,
    thinking: ThinkingPlan | None,
    plan: ToolPlan | None,
    body: Body | None,
    compact: bool,
    held: bool,
) -> Shape:
    """The grammar (when `held`: the predictor takes one, and the model thinks) and the reader of an answer in
    `form`. `body` is the constraint the request puts on the answer itself (JSON under a schema; None: text,
    or the calls of `plan`: in the model's own syntax, else modelport's JSON answer)."""
    syntax = native(form, plan)
    own_calls = form.harmony and plan is not None and not plan.legacy  # harmony's commentary channel
    answer: Callable[[], Reader] = TextReader
    if syntax is not None and plan is not None:
        answer = lambda: syntax.reader(plan)  # noqa: E731
    elif plan is not None and not own_calls:
        answer = lambda: AnswerParser(plan.legacy)  # noqa: E731
        body = lambda g: g.json("plan", plan.schema(), compact)  # noqa: E731
    if form.frame is not None:
        framed, frame = answer, form.frame
        answer = lambda: Unframed(framed(), frame)  # noqa: E731
    grammar = None
    if held and (thinking is not None or syntax is not None):
        grammar = _grammar(form, thinking, plan if own_calls or syntax else None, syntax, body, compact)
    legacy = bool(plan and plan.legacy)
    if form.harmony:
        return Shape(grammar, lambda: harmony.HarmonyReader(answer(), legacy), form.markers)
    tags = _marks(form, thinking)
    if tags is None:
        return Shape(grammar, answer, form.markers)
    opened = _opened(tags, thinking)
    return Shape(grammar, lambda: ThinkingReader(tags.open, tags.close, opened, answer()), form.markers)


def _marks(form: ChatFormat, thinking: ThinkingPlan | None) -> ThinkingMarks | None:
    """The marks of the answer's thinking: as the effort told makes them (K2 Horizon's tag), else the
    family's."""
    return thinking.marks if thinking is not None and thinking.marks is not None else form.thinking


def _opened(tags: ThinkingMarks, thinking: ThinkingPlan | None) -> bool:
    """Whether the prompt opened the thinking: as the engine found it at the model's load, unless the effort
    closed it; or, for a template that opens it whenever it is told to think (Hy3's), whether it was."""
    if tags.opens and thinking is not None:
        return thinking.on
    return tags.opened and (thinking is None or thinking.on or not tags.closable)


def _grammar(
    form: ChatFormat,
    thinking: ThinkingPlan | None,
    plan: ToolPlan | None,
    syntax: CallSyntax | None,
    body: Body | None,
    compact: bool,
) -> str:
    """The grammar of a whole answer: the thinking (bounded; absent when the effort turns it off), then the
    answer: the calls of `plan` in `syntax` (or harmony's), or `body`, or text."""
    g = Grammar(form.tokens)
    if form.harmony:
        assert thinking is not None
        held = body(g) if body is not None else None
        harmony.answer(g, thinking.budget if thinking.on else None, held, plan, compact)
        return g.text()
    tags = _marks(form, thinking)
    if syntax is not None and plan is not None:
        answer: str | None = syntax.answer(plan, g, compact)
    else:
        answer = body(g) if body is not None else None
        if form.frame is not None:  # Cohere's text and JSON between its markers (text may be empty)
            optional = "?" if answer is None else ""
            answer = g.framed("framed", form.frame, answer, form.frame_opened) + optional
    # Bounded: a model that does not know the format's opening (or the text after its thinking) could write
    # whitespace to the end of its tokens, which the grammar would allow (SmolLM2's weights under LFM2's
    # template wrote 120 tokens of it before a required call). And ASCII's, what templates write there and
    # JSON may begin with: a regex's `\s` is any Unicode space, and a JSON answer began with no-break spaces
    # that no JSON parser takes (SmolLM2's first blocks under MiniCPM5's template).
    space = g.rule("SPACE", "/[ \\t\\r\\n]{1,8}/")
    if tags is None or thinking is None:  # calls in the model's syntax, no thinking
        assert answer is not None
        g.rule("start", f"{space}? {answer}")
        return g.text()
    if answer is None:  # text that does not begin the thinking over again
        text = g.rule("ANSWER", f"/[^\\s]{ANY}/ & ~/{regex(tags.open)}{ANY}/")
        answer = f"{text}?"
    opening, closing = g.literal(tags.open), g.literal(tags.close)
    if thinking.on:
        thought = g.until("thought", tags.close, thinking.budget)  # the thinking and its closing marker
        if _opened(tags, thinking):
            g.rule("start", f"{thought} {space}? {answer}")
        else:
            # A turn that does not think may say so with the closing marker alone (MiniMax M3's).
            block = g.rule("thinking", f"{opening} {thought} | {closing}")
            g.rule("start", f"{block}? {space}? {answer}")
    elif tags.opened and not tags.closable:  # the prompt opened it and nothing else can: it closes at once
        g.rule("start", f"{closing} {space}? {answer}")
    else:
        g.rule("start", f"{space}? {answer}")
    return g.text()
