"""What modelport tells a model's template for each effort, rendered by the template itself (Jinja, as the
engine renders it), for every real template here: a template said to be steered by a variable writes another
prompt for `none` than for `high`, and no effort OpenAI names is refused by it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modelport.predictors.chat_format import detect, shown_tools
from modelport.service.generation.formats import effort
from tests.support.jinja_templates import jinja_environment

TEMPLATES = sorted((Path(__file__).parent / "templates" / "real").glob("*.jinja"))


def told(template: str, given: str) -> dict[str, Any]:
    """The template variables modelport tells a template for the effort `given`."""
    form = detect(template)
    plan = effort.plan(form, given, 1000)
    return plan.variables if plan is not None else effort.foreign(form, given)


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda path: path.stem)
def test_each_effort_renders_and_steers_a_template_said_to_be_steered(path: Path) -> None:
    template = shown_tools(path.read_text())  # as the engine renders it
    render = jinja_environment().from_string(template).render
    messages = [{"role": "user", "content": "Name a colour."}]
    prompts = {
        given: render(messages=messages, add_generation_prompt=True, bos_token="<s>", eos_token="</s>",
                      **told(template, given))
        for given in effort.EFFORTS
    }  # fmt: skip
    form = detect(template)
    thinking = form.thinking
    steered = (thinking.switch or thinking.effort or thinking.budget) if thinking else form.foreign_switch
    if steered:
        assert prompts["none"] != prompts["high"]
