"""What a model's chat template does with a conversation, learnt at load by rendering probes through
llama.cpp's own renderer: the text that ends an assistant turn (generation must stop there, and it must not
show in the answer), and whether the template refuses a conversation that does not open with the user.

llama.cpp already folds a system message into the first user turn for templates without a system role
(Gemma's, Mistral's, Phi-3's); neighbouring messages of one role are merged by the service.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Render = Callable[[list[dict[str, Any]]], str | None]  # the prompt, or None when the template refuses

_A, _U, _V = "\u00a7A\u00a7", "\u00a7U\u00a7", "\u00a7V\u00a7"  # markers no template writes itself
_FIRST_TOKEN = re.compile(r"\s*(<\|[^|>]{1,40}\|>|</?[A-Za-z_]{1,40}>)")


@dataclass(frozen=True)
class TemplateTraits:
    """A template's turn ending, and whether it needs the user to speak first."""

    turn_end: str | None
    user_first: bool

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
    if answered is not None and alone is not None and _A in answered and _V in answered and _V in alone:
        between = answered[answered.index(_A) + len(_A) : answered.index(_V)]
        before = alone[: alone.index(_V)]
        turn_end = _turn_end(between, before)
    refused = render([{"role": "assistant", "content": _A}, {"role": "user", "content": _U}]) is None
    return TemplateTraits(turn_end, refused)


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
