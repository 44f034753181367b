"""A WebRTC call's answer audio, on its own: what an interruption cuts, including when speech synthesis has
fallen behind and nothing waits to be played between an answer's clauses."""

from __future__ import annotations

from typing import Any

from modelport.service.audio.codec import OUTPUT_RATE
from modelport.service.realtime.playout import Cut, Playout

SECOND = bytes(2 * OUTPUT_RATE)  # one second of 16-bit silence at 24 kHz


def playout() -> tuple[Playout, list[Any]]:
    told: list[Any] = []
    return Playout(told.append), told


def test_an_interruption_while_audio_waits_cuts_the_item_where_it_was_heard() -> None:
    audio, told = playout()
    audio.play("resp_1", "item_1", SECOND * 2)
    audio.take(OUTPUT_RATE // 2)
    assert audio.clear() == Cut("resp_1", "item_1", 500)
    assert [e.type for e in told] == ["output_audio_buffer.started", "output_audio_buffer.cleared"]


def test_an_interruption_while_synthesis_is_behind_still_cuts_the_item_playing() -> None:
    """The first clause has played and the second is not made yet: the answer is still playing (it has
    not stopped), so the user speaking over it cuts it where they stopped hearing it."""
    audio, told = playout()
    audio.play("resp_1", "item_1", SECOND)
    audio.take(OUTPUT_RATE * 3 // 2)  # half a second of silence after the clause: synthesis is behind
    assert audio.clear() == Cut("resp_1", "item_1", 1000)
    assert [e.type for e in told] == ["output_audio_buffer.started", "output_audio_buffer.cleared"]


def test_once_an_answer_has_stopped_an_interruption_cuts_nothing() -> None:
    audio, told = playout()
    audio.play("resp_1", "item_1", SECOND)
    audio.finished("resp_1")
    audio.take(OUTPUT_RATE * 2)
    assert audio.clear() is None
    assert [e.type for e in told] == ["output_audio_buffer.started", "output_audio_buffer.stopped"]


def test_audio_queued_but_not_yet_played_is_cut_at_nothing_heard() -> None:
    audio, told = playout()
    audio.play("resp_2", "item_2", SECOND)
    assert audio.clear() == Cut("resp_2", "item_2", 0)
    assert [e.type for e in told] == ["output_audio_buffer.cleared"]
