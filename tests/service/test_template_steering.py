"""What modelport tells a model's template for each effort, rendered by the template itself (Jinja, as the
engine renders it), for every real template here: a template said to be steered by a variable writes another
prompt for `none` than for `high`, and no effort OpenAI names is refused by it."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any, ClassVar

import jinja2
import pytest
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from modelport.predictors.chat_format import detect
from modelport.service.generation.formats import effort

TEMPLATES = sorted((Path(__file__).parent / "templates" / "real").glob("*.jinja"))


class _Generation(Extension):
    """`{% generation %}…{% endgeneration %}` (Hugging Face's mark of what a model wrote): its body."""

    tags: ClassVar[set[str]] = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        return nodes.Scope(parser.parse_statements(("name:endgeneration",), drop_needle=True), lineno=lineno)


def _refuse(message: str) -> None:
    raise jinja2.TemplateError(message)


def _environment() -> ImmutableSandboxedEnvironment:
    """Jinja as Hugging Face's chat templates are rendered (`transformers`' own settings and helpers)."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", _Generation]
    )
    env.globals["raise_exception"] = _refuse
    env.globals["strftime_now"] = lambda form: datetime.datetime.now().strftime(form)
    env.filters["tojson"] = lambda value, ensure_ascii=True, **_: json.dumps(value, ensure_ascii=ensure_ascii)
    return env


def told(template: str, given: str) -> dict[str, Any]:
    """The template variables modelport tells a template for the effort `given`."""
    form = detect(template)
    plan = effort.plan(form, given, 1000)
    return plan.variables if plan is not None else effort.foreign(form, given)


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda path: path.stem)
def test_each_effort_renders_and_steers_a_template_said_to_be_steered(path: Path) -> None:
    template = path.read_text()
    render = _environment().from_string(template).render
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
