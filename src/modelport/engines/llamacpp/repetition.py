"""The repetition stop: a greedy answer that has started to repeat the same run of tokens will repeat it
until its length runs out (greedy decoding picks the same next token from the same recent context; small
models do this often, and an answer with no bound of its own then runs thousands of tokens). The stop
ends such an answer as soon as the repetition is certain, as a `length` finish."""

from __future__ import annotations

from typing import Any

LONGEST_PERIOD = 256  # tokens: the longest repeated run looked for (a paragraph)
LEAST_SPAN = 192  # tokens an answer must repeat over before it is stopped, whatever the period
REPEATS = 3  # times a longer run must occur back to back
_EVERY = 8  # tokens between looks: a loop is found at most this late


def watched(request: dict[str, Any]) -> bool:
    """Whether a request decodes greedily (where a repetition never ends by chance) and has not asked for
    its whole length whatever it holds (`ignore_eos`, as benchmarks do)."""
    greedy = request.get("temperature") == 0 or request.get("top_k") == 1
    return greedy and not request.get("ignore_eos")


class Repetition:
    """Watches the pieces of one answer; `looping()` once the latest tokens are one run repeated, over at
    least `LEAST_SPAN` tokens and `REPEATS` times."""

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._seen = 0

    def looping(self, piece: str) -> bool:
        pieces = self._pieces
        pieces.append(piece)
        self._seen += 1
        if len(pieces) > 4 * LONGEST_PERIOD * REPEATS:
            del pieces[: len(pieces) - REPEATS * LONGEST_PERIOD]  # longer ago than any span looked at
        n = len(pieces)
        if n < LEAST_SPAN or self._seen % _EVERY:
            return False
        last = pieces[-1]
        for period in range(1, LONGEST_PERIOD + 1):
            span = max(REPEATS * period, LEAST_SPAN)
            if span > n:
                return False
            # The cheap test first: the latest token one period back. Then the whole span, shifted by one
            # period, equal to itself: the span is that period's run repeated.
            if pieces[-1 - period] == last and pieces[n - span + period :] == pieces[n - span : n - period]:
                return True
        return False
