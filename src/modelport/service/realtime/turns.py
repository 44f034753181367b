"""Turn detection: where the user's speech starts and stops, from the speech detector's probabilities of
32 ms windows. `server_vad` takes OpenAI's parameters as they are; `semantic_vad` is served by the same
detector, its `eagerness` read as how long a silence ends a turn (low 1.5 s, medium and auto 0.8 s, high
0.4 s), since no model here judges whether a sentence is finished."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from modelport.engines.silero_vad import RATE, WINDOW

WINDOW_MS = WINDOW * 1000 // RATE  # 32
EAGERNESS_SILENCE_MS = {"low": 1500, "medium": 800, "auto": 800, "high": 400}
_START_WINDOWS = 2  # windows in a row over the threshold that start speech: a click is not a turn
_PAUSE_MS = 160


@dataclass
class Change:
    """Speech started or stopped, at a time from the start of the session's audio; or, while speaking, it
    paused (a silence began that may end the turn) or resumed after a pause."""

    kind: Literal["started", "paused", "resumed", "stopped"]
    ms: int


class TurnDetector:
    """Feeds on window probabilities; says when speech starts (minus the prefix padding) and when a long
    enough silence after it stops it."""

    def __init__(self, config: dict[str, Any], start_ms: int = 0) -> None:
        self.threshold = float(config.get("threshold") or 0.5)
        padding = config.get("prefix_padding_ms")
        self.prefix_ms = int(padding) if padding is not None else 300
        if config.get("type") == "semantic_vad":
            self.silence_ms = EAGERNESS_SILENCE_MS[config.get("eagerness") or "auto"]
        else:
            self.silence_ms = int(config.get("silence_duration_ms") or 500)
        # A silence this long is a pause that may end the turn: the audio so far can be transcribed while
        # the rest of the silence is waited for.
        self._pause_ms = max(WINDOW_MS, min(_PAUSE_MS, self.silence_ms // 2) // WINDOW_MS * WINDOW_MS)
        self.speaking = False
        self._run = 0  # windows over the threshold in a row, or silent windows in a row while speaking
        self._ms = start_ms  # where the next window starts, from the start of the session's audio

    def feed(self, probabilities: list[float]) -> list[Change]:
        changes = []
        for probability in probabilities:
            self._ms += WINDOW_MS
            if not self.speaking:
                self._run = self._run + 1 if probability >= self.threshold else 0
                if self._run >= _START_WINDOWS:
                    self.speaking, self._run = True, 0
                    start = self._ms - _START_WINDOWS * WINDOW_MS
                    changes.append(Change("started", max(0, start - self.prefix_ms)))
            else:
                # A little hysteresis: speech goes on until the probability falls clearly below.
                silent = probability < self.threshold - 0.15
                if not silent and self._run * WINDOW_MS >= self._pause_ms:
                    changes.append(Change("resumed", self._ms - WINDOW_MS))
                self._run = self._run + 1 if silent else 0
                if self._run * WINDOW_MS == self._pause_ms:
                    changes.append(Change("paused", self._ms - self._run * WINDOW_MS))
                if self._run * WINDOW_MS >= self.silence_ms:
                    self.speaking, self._run = False, 0
                    changes.append(Change("stopped", self._ms))
        return changes

    @property
    def ms(self) -> int:
        """Where the audio fed so far ends."""
        return self._ms
