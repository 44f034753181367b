"""Writing llguidance grammars (its Lark syntax, which llama.cpp takes as `grammar`) for a model's format:
rules named once, text quoted, and the format's markers named by their token ids in the model's vocabulary
where the model's format says them (`<[id]>`).

Naming a marker by its tokens does three things a quoted literal cannot: a special token (harmony's
`<|end|>`) is matched at all (its text is not generated as text); the model writes a marker as it learnt it;
and free text before a marker can end where the marker begins. llguidance's lexer is greedy: a lexeme of
"any text without `</think>`" followed by the literal `"</think>"` swallows `</think` and then fails at `>`;
followed by the marker's tokens, the two are told apart by the tokens. That is also what lets a bound on
the text (`max_tokens`) force the marker after it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from modelport.service.generation.schema import closed
from modelport.service.generation.schema import compact as schema_compact

ANY = "(.|\\n)*"  # any text, as a regular expression of llguidance's


class Grammar:
    """The rules of one grammar; `text()` writes it with `start` first."""

    def __init__(self, tokens: tuple[tuple[str, tuple[int, ...]], ...] = ()) -> None:
        self.tokens = {marker: ids for marker, ids in tokens if ids}
        self._rules: dict[str, tuple[str, str]] = {}  # name: (body, attributes)
        self._shared: dict[str, str] = {}  # what `shared` made, by its key

    def rule(self, name: str, body: str, max_tokens: int | None = None, suffix: str | None = None) -> str:
        """Add `name: body` (a name already taken gets a number; a name in capitals is a lexeme) and return
        the name used. `max_tokens` bounds a lexeme's rule (when they are spent, what follows it is forced);
        `suffix` makes it end lazily at the first `suffix`, which it includes."""
        # A lexeme's name is all capitals, a rule's all small letters (llguidance refuses a mix).
        name = re.sub(r"\W", "_", name)
        name = name.upper() if name[:1].isupper() else name.lower()
        used, n = name, 1
        while used in self._rules:
            n += 1
            used = f"{name}{n}"
        attributes = []
        if max_tokens is not None:
            attributes.append(f"max_tokens={max(max_tokens, 1)}")
        if suffix is not None:
            attributes.append(f"suffix={json.dumps(suffix)}")
        self._rules[used] = (body, f"[{', '.join(attributes)}]" if attributes else "")
        return used

    def shared(self, key: str, make: Callable[[], str]) -> str:
        """The rule `make` adds (and names), made once however many ask for it by `key` (a string or a number
        lexeme every argument of every tool takes)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def literal(self, text: str) -> str:
        """`text` as quoted text and markers named by their tokens."""
        if not text:
            return '""'
        if not self.tokens:
            return json.dumps(text, ensure_ascii=False)
        split = "(" + "|".join(re.escape(m) for m in sorted(self.tokens, key=len, reverse=True)) + ")"
        pieces = [p for p in re.split(split, text) if p]
        return " ".join(
            " ".join(f"<[{token}]>" for token in self.tokens[p]) if p in self.tokens else json.dumps(p)
            for p in pieces
        )

    def until(self, name: str, marker: str, max_tokens: int | None = None) -> str:
        """Free text up to `marker`, and the marker: the text bounded to `max_tokens` where the marker is
        named by its tokens (when they are spent, the marker is forced); where it is not, the text ends
        lazily at the first marker, unbounded."""
        if marker in self.tokens:
            text = self.text_lexeme(name, marker)
            return f"{self.rule(name.lower(), text, max_tokens=max_tokens)} {self.literal(marker)}"
        return self.rule(name.lower(), f"/{ANY}/", suffix=marker)

    def framed(self, name: str, frame: tuple[str, str], body: str | None = None, opened: bool = False) -> str:
        """A rule of `body` (a rule; None: text without the closing marker) between a family's frame markers
        (Cohere's `<|START_RESPONSE|>`…`<|END_RESPONSE|>`); the answer may end before the closing one, and
        begin without the opening one where the prompt may have written it (`opened`: Kimi K3's)."""
        opening, closing = frame
        held = body or self.text_lexeme(name.upper(), closing)
        begins = f"({self.literal(opening)})?" if opened else self.literal(opening)
        return self.rule(name.lower(), f"{begins} {held} ({self.literal(closing)})?")

    def json(self, name: str, schema: dict[str, Any], compact: bool = True) -> str:
        """A rule for JSON that validates against `schema` (laid out compactly unless told otherwise; an
        object that does not say whether it takes other properties takes none, as `json_grammar`'s)."""
        laid = schema_compact(closed(schema)) if compact else closed(schema)
        return self.rule(name, f"%json {json.dumps(laid, ensure_ascii=False)}")

    def text_lexeme(self, name: str, *stops: str, not_first: str = "", nonempty: bool = False) -> str:
        """A lexeme of any text that holds none of `stops`, does not begin with a character of `not_first`
        (nor with whitespace, when `not_first` is given), and is not empty if `nonempty`."""
        body = f"/[^{_class(not_first)}\\s]{ANY}/" if not_first else f"/{ANY}/"
        if nonempty and not not_first:
            body = "/(.|\\n)+/"
        if stops:  # one negation of them all: a negation each makes llguidance's lexer too large
            body += f" & ~/{ANY}({'|'.join(regex(stop) for stop in stops)}){ANY}/"
        return self.rule(name.upper(), body)

    def text(self) -> str:
        """The whole grammar, `start` first."""
        lines = ["%llguidance {}"]
        for name in sorted(self._rules, key=lambda name: name != "start"):
            body, attributes = self._rules[name]
            lines.append(f"{name}{attributes}: {body}")
        return "\n".join(lines) + "\n"


def regex(text: str) -> str:
    """`text` as a literal inside an llguidance regular expression."""
    return "".join("\\" + c if c in "\\/.^$|?*+()[]{}-" else c for c in text)


def _class(chars: str) -> str:
    return "".join("\\" + c if c in "[]\\^-/" else c for c in chars)
