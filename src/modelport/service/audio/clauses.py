"""Text that streams in, cut into clauses as soon as each is whole, so speech can start before the text
ends: at a sentence end or a line break, or, in a long stretch without one, at its last comma or space."""

from __future__ import annotations

import re

from modelport.service.audio.speech import split_sentences

_CLAUSE_END = re.compile(r"[.!?;:。！？](?=\s)|\n")
_LONG_CLAUSE = 160  # characters without a clause end after which the text is spoken up to a comma or space
# The first clause goes sooner: a listener waits for it, and the rest is spoken while it plays.
_FIRST_COMMA = 16  # characters after which the first clause may end at a comma
_FIRST_LONG = 60  # ... or at a space


class Clauses:
    """Collects streamed text; `add` gives the clauses it completed, `rest` what remains at the end."""

    def __init__(self) -> None:
        self.pending = ""
        self.first = True

    def add(self, text: str) -> list[str]:
        """Take more text; the clauses now whole (taken from what is pending)."""
        self.pending += text
        ends = [m.end() for m in _CLAUSE_END.finditer(self.pending)]
        cut = ends[-1] if ends else 0
        if not cut and self.first:
            comma = self.pending.rfind(", ", _FIRST_COMMA)
            cut = (
                comma + 1
                if comma > 0
                else (self.pending.rfind(" ") + 1 if len(self.pending) > _FIRST_LONG else 0)
            )
        if not cut and len(self.pending) > _LONG_CLAUSE:
            cut = max(self.pending.rfind(", "), self.pending.rfind(" ")) + 1
        if cut <= 0 or not self.pending[:cut].strip():
            return []
        whole, self.pending = self.pending[:cut], self.pending[cut:]
        self.first = False
        return split_sentences(whole)

    def rest(self) -> list[str]:
        """What is still pending, as clauses (emptied)."""
        rest, self.pending = self.pending, ""
        return split_sentences(rest) if rest.strip() else []
