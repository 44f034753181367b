"""DeepSeek's calls (R1, V3): text, or the calls between `<｜tool▁calls▁begin｜>` and
`<｜tool▁calls▁end｜>`, each `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`, its arguments as a JSON block
(```json … ```), then `<｜tool▁call▁end｜>`; V3.1's (`deepseek_v31`) each
`<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>`, its arguments as JSON, then `<｜tool▁call▁end｜>`, one after
another.

The grammar holds each call's arguments to its tool's schema; the reader gives each call's name as its
block opens and its arguments as they are written.
"""

from __future__ import annotations

from typing import Any

from modelport.service.generation.formats.lark import Grammar
from modelport.service.generation.formats.sections import SectionCalls

BEGIN, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL, SEP, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"
_OPEN_ARGUMENTS, _CLOSE_ARGUMENTS = "\n```json\n", "\n```"


class DeepSeek(SectionCalls):
    """DeepSeek's call syntax."""

    name = "deepseek"
    markers = (BEGIN, END, f"{CALL}function{SEP}", _OPEN_ARGUMENTS, CALL_END)
    between = '"\\n"'
    closes = _CLOSE_ARGUMENTS

    def named(self, tool: dict[str, Any], grammar: Grammar) -> str:
        return grammar.literal(f"{tool['name']}{_OPEN_ARGUMENTS}")


class DeepSeekV31(SectionCalls):
    """DeepSeek V3.1's call syntax."""

    name = "deepseek_v31"
    markers = (BEGIN, END, CALL, SEP, CALL_END)

    def named(self, tool: dict[str, Any], grammar: Grammar) -> str:
        return grammar.literal(f"{tool['name']}{SEP}")
