"""What a model's chat template does with a conversation, learnt at load by rendering probes through
llama.cpp's own renderer: the text that ends an assistant turn (generation must stop there, and it must not
show in the answer), whether the template refuses a conversation that does not open with the user, and
whether its generation prompt already opens the model's thinking. Before the model loads, its format is read
from the template's text (`formatted`).

llama.cpp already folds a system message into the first user turn for templates without a system role
(Gemma's, Mistral's, Phi-3's); neighbouring messages of one role are merged by the service.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelport.engines.llamacpp import gguf_header
from modelport.predictors import chat_format
from modelport.predictors.chat_format import ChatFormat

Render = Callable[[list[dict[str, Any]]], str | None]  # the prompt, or None when the template refuses

_A, _U, _V = "\u00a7A\u00a7", "\u00a7U\u00a7", "\u00a7V\u00a7"  # markers no template writes itself
_FIRST_TOKEN = re.compile(r"\s*(<\|[^|>]{1,40}\|>|</?[A-Za-z_]{1,40}>)")


@dataclass(frozen=True)
class TemplateTraits:
    """A template's turn ending, whether it needs the user to speak first, and how many characters it
    writes before a lone user message's text (its own system text, the turn's opening)."""

    turn_end: str | None
    user_first: bool
    preamble: int = 0

    def adapt(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`messages` as the template accepts them: an empty user turn before an opening assistant turn
        when the template demands that the user speak first."""
        if not self.user_first:
            return messages
        spoken = (i for i, m in enumerate(messages) if m.get("role") not in ("system", "developer"))
        opening = next(spoken, None)
        if opening is not None and messages[opening].get("role") == "assistant":
            return [*messages[:opening], {"role": "user", "content": ""}, *messages[opening:]]
        return messages


def probe(render: Render) -> TemplateTraits:
    """Render a few conversations and read the template's traits from the prompts."""
    answered = render(
        [
            {"role": "user", "content": _U},
            {"role": "assistant", "content": _A},
            {"role": "user", "content": _V},
        ]
    )
    alone = render([{"role": "user", "content": _V}])
    turn_end = None
    preamble = alone.index(_V) if alone is not None and _V in alone else 0
    if answered is not None and alone is not None and _A in answered and _V in answered and _V in alone:
        between = answered[answered.index(_A) + len(_A) : answered.index(_V)]
        turn_end = _turn_end(between, alone[:preamble])
    refused = render([{"role": "assistant", "content": _A}, {"role": "user", "content": _U}]) is None
    return TemplateTraits(turn_end, refused, preamble)


def _turn_end(between: str, before: str) -> str | None:
    """What ends a turn: what lies between an answer and the next user turn, less that user turn's own
    opening (the text in front of a lone user message); or the first special-looking token there, when
    the lone message is preceded by the same text (a template that always opens with its own system
    turn)."""
    shared = 0
    while shared < min(len(between), len(before)) and between[-1 - shared] == before[-1 - shared]:
        shared += 1
    ending = between[: len(between) - shared].strip()
    found = _FIRST_TOKEN.match(between)
    if found and found.group(1).startswith(ending):  # nothing left, or a token cut by a shared `|>`
        ending = found.group(1)
    return ending or None


def formatted(template: str, gguf: Path) -> ChatFormat:
    """The format the template shows (`chat_format.detect`), with those of its markers that are special
    tokens of the GGUF's vocabulary."""
    found = chat_format.detect(template)
    return dataclasses.replace(found, special=gguf_header.control_tokens(gguf, found.markers))


def opened(form: ChatFormat, render: Render) -> ChatFormat:
    """`form`, knowing whether the generation prompt opens the thinking (DeepSeek R1's distills, QwQ: every
    answer then starts inside it)."""
    thinking = form.thinking
    if thinking is None or form.harmony:
        return form
    prompt = render([{"role": "user", "content": _V}])
    if prompt is None or not prompt.rstrip().endswith(thinking.open):
        return form
    return dataclasses.replace(form, thinking=dataclasses.replace(thinking, opened=True))


# A message's thinking as templates read it where not from `reasoning_content`, the field llama.cpp hands
# messages to a template with: `message.thinking` (gpt-oss's, LFM2.5's), `message.reasoning` (Solar Open's),
# and in harmony's templates `message['thinking']` (elsewhere that is a content block's: Ministral's).
_THINKING_FIELD = re.compile(r"\b(message|m|msg)\.(?:thinking|reasoning)\b")
_HARMONY_THINKING_FIELD = re.compile(r"\b(message|m|msg)\.thinking\b|\[(['\"])thinking\2\]")


def given_thinking(template: str, harmony: bool) -> str:
    """A template that reads a message's thinking from `reasoning_content`, the field llama.cpp renders
    messages with, where it read another (which llama.cpp's own paths for some families copy over, and which
    a raw chat does not pass on): so the thinking of a turn that called a tool is given back."""
    if "reasoning_content" in template:
        return template
    field = _HARMONY_THINKING_FIELD if harmony else _THINKING_FIELD
    return field.sub(
        lambda found: f"{found[1]}.reasoning_content" if found[1] else "['reasoning_content']", template
    )
