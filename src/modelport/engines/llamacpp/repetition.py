"""The repetition stop: a greedy answer that has started to repeat the same run of tokens will repeat it
until its length runs out (greedy decoding picks the same next token from the same recent context; small
models do this often, and an answer with no bound of its own then runs thousands of tokens). The stop
ends such an answer as soon as the repetition is certain, as a `length` finish.

A sampled answer can leave a loop by chance, and text does repeat itself (a table's rows, a list): it is
stopped only well past that, once the same run has come back to back `SAMPLED_REPEATS` times over at least
`SAMPLED_SPAN` tokens (an 8,500-character answer of one sentence repeated was seen under the default bound,
at temperature 1)."""

from __future__ import annotations

from typing import Any

LONGEST_PERIOD = 256  # tokens: the longest repeated run looked for (a paragraph)
LEAST_SPAN = 192  # tokens an answer must repeat over before it is stopped, whatever the period
REPEATS = 3  # times a longer run must occur back to back
SAMPLED_SPAN = 768  # tokens a sampled answer must repeat over
SAMPLED_REPEATS = 8  # times a sampled answer's longer run must occur back to back
_EVERY = 8  # tokens between looks: a loop is found at most this late


def watch_of(request: dict[str, Any]) -> Repetition | None:
    """The watch of a request's answer: a greedy one's (where a repetition never ends by chance), or a
    sampled one's; none when it asked for its whole length whatever it holds (`ignore_eos`, as benchmarks
    do)."""
    if request.get("ignore_eos"):
        return None
    if request.get("temperature") == 0 or request.get("top_k") == 1:
        return Repetition()
    return Repetition(SAMPLED_SPAN, SAMPLED_REPEATS)


class Repetition:
    """Watches the pieces of one answer; `looping()` once the latest tokens are one run repeated, over at
    least `least_span` tokens and `repeats` times."""

    def __init__(self, least_span: int = LEAST_SPAN, repeats: int = REPEATS) -> None:
        self._pieces: list[str] = []
        self._seen = 0
        self.least_span = least_span
        self.repeats = repeats

    def looping(self, piece: str) -> bool:
        pieces = self._pieces
        pieces.append(piece)
        self._seen += 1
        longest = max(self.repeats * LONGEST_PERIOD, self.least_span)  # the longest span looked at
        if len(pieces) > 4 * longest:
            del pieces[: len(pieces) - longest]
        n = len(pieces)
        if n < self.least_span or self._seen % _EVERY:
            return False
        last = pieces[-1]
        for period in range(1, LONGEST_PERIOD + 1):
            span = max(self.repeats * period, self.least_span)
            if span > n:
                return False
            # The cheap test first: the latest token one period back. Then the whole span, shifted by one
            # period, equal to itself: the span is that period's run repeated.
            if pieces[-1 - period] == last and pieces[n - span + period :] == pieces[n - span : n - period]:
                return True
        return False
