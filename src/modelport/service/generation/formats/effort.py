"""Reasoning effort (`reasoning_effort` in chat, `reasoning.effort` in Responses) on a model that thinks:
the template variable its family reads, and a budget of thinking tokens that leaves room for the answer.

- `none`, `minimal`: no thinking: the template's switch where it has one (`enable_thinking`, `thinking`,
  MiniMax M3's `thinking_mode`, told `disabled`; any other effort leaves it at its default),
  or `none` for its effort where that is its switch (Cohere's MoE models), else the thinking is closed at
  once; gpt-oss writes no analysis.
- `low`: at most a quarter of the answer's `max_tokens`, and 1,024 tokens.
- `medium` (the default): at most half of `max_tokens`, and 4,096 tokens.
- `high`: at most three quarters of `max_tokens`, and 16,384 tokens.
- `xhigh`, `max`: at most nine tenths of `max_tokens`.

When the budget is spent, the closing marker is forced (the grammar's bound), so the answer or the call always
comes. A family whose template takes the budget itself (Seed-OSS's `thinking_budget`) is told it too: it then
plans its thinking to fit, where the bound alone would cut it short. gpt-oss reads the effort itself
(`Reasoning: low|medium|high` in its system message, from the `reasoning_effort` variable): `minimal` and
`none` are `low` there, `xhigh` and `max` are `high`. Hy3 takes `no_think` (for `none` and `minimal`), `low`
and `high` (for the rest), and its prompt opens the thinking for the two. K2 Horizon takes high, medium and
low, each opening a thinking of its own tag (`none` and `minimal` are `low`, closed at once: nothing turns it
off); Kimi K3's `thinking_effort` low, high and max (`medium` is `high`, `xhigh` `max`); DeepSeek V4 writes
its prompt for `max` (`xhigh` is told `max`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelport.predictors.chat_format import ChatFormat, ThinkingMarks

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
DEFAULT = "medium"
_SHARE = {
    "low": (0.25, 1024),
    "medium": (0.5, 4096),
    "high": (0.75, 16384),
    "xhigh": (0.9, None),
    "max": (0.9, None),
}


@dataclass(frozen=True)
class ThinkingPlan:
    """What a request lets a model that thinks do: whether it thinks, within how many tokens (None: no
    bound), the template variables that tell it, and the marks its thinking is then in (None: the family's
    own; K2 Horizon's tag changes with its effort)."""

    on: bool
    budget: int | None
    variables: dict[str, Any] = field(default_factory=dict)
    marks: ThinkingMarks | None = None


def foreign(form: ChatFormat, effort: str | None) -> dict[str, Any]:
    """The template variable that tells a family whose thinking the engine reads (Gemma 4's) whether the
    effort a request gives lets it think. None given, nothing: the engine's default stands (llama.cpp tells a
    template to think)."""
    if effort is None or not form.foreign_thinking or not form.foreign_switch:
        return {}
    return {form.foreign_switch: effort not in ("none", "minimal")}


def plan(form: ChatFormat, effort: str | None, max_tokens: int | None) -> ThinkingPlan | None:
    """The thinking a request with this `effort` (None: the default) and answer bound allows; None for a
    model that does not think."""
    thinking = form.thinking
    if thinking is None:
        return None
    effort = effort or DEFAULT
    variables: dict[str, Any] = {}
    words = dict(thinking.words)  # the template's own, where it has them (gpt-oss's, Hy3's)
    if thinking.effort:
        variables[thinking.effort] = words.get(effort, effort)
        thinking = thinking.told(variables[thinking.effort])
    if effort in ("none", "minimal"):
        if thinking.switch:
            variables[thinking.switch] = thinking.off
        elif thinking.effort and thinking.closable and not form.harmony:  # the effort is its switch
            variables[thinking.effort] = words.get("none", "none")  # its word for none turns it off
        if thinking.budget:
            variables[thinking.budget] = 0
        return ThinkingPlan(False, 0, variables, thinking)
    if thinking.switch and thinking.on is not None:
        variables[thinking.switch] = thinking.on
    share, most = _SHARE[effort]
    budget = None if max_tokens is None else int(max_tokens * share)
    if most is not None:
        budget = most if budget is None else min(budget, most)
    if thinking.budget:
        variables[thinking.budget] = -1 if budget is None else budget
    return ThinkingPlan(True, budget, variables, thinking)
