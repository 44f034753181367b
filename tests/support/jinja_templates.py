"""Chat templates rendered as Hugging Face renders them (Jinja, `transformers`' settings and helpers): what a
template writes, checked without an engine."""

from __future__ import annotations

import datetime
import json
from typing import ClassVar

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment


class _Generation(Extension):
    """`{% generation %}…{% endgeneration %}` (Hugging Face's mark of what a model wrote): its body."""

    tags: ClassVar[set[str]] = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        return nodes.Scope(parser.parse_statements(("name:endgeneration",), drop_needle=True), lineno=lineno)


def _refuse(message: str) -> None:
    raise jinja2.TemplateError(message)


def jinja_environment() -> ImmutableSandboxedEnvironment:
    """Jinja as Hugging Face's chat templates are rendered (`transformers`' own settings and helpers)."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", _Generation]
    )
    env.globals["raise_exception"] = _refuse
    env.globals["strftime_now"] = lambda form: datetime.datetime.now().strftime(form)
    env.filters["tojson"] = lambda value, ensure_ascii=True, **_: json.dumps(value, ensure_ascii=ensure_ascii)
    return env
