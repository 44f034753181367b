"""The repetition stop's watch, on token sequences built here (no model)."""

from __future__ import annotations

from modelport.engines.llamacpp.repetition import LEAST_SPAN, SAMPLED_SPAN, Repetition, watch_of


def first_stop(pieces: list[str], watch: Repetition | None = None) -> int | None:
    watch = watch or Repetition()
    return next((i + 1 for i, piece in enumerate(pieces) if watch.looping(piece)), None)


def test_a_run_repeated_back_to_back_is_stopped_soon_after_the_least_span() -> None:
    intro = [f"w{i}" for i in range(50)]
    run = [f"r{i}" for i in range(37)]
    stopped = first_stop(intro + run * 40)
    assert stopped is not None
    assert 50 + LEAST_SPAN <= stopped <= 50 + LEAST_SPAN + 8


def test_a_long_run_is_stopped_after_three_repeats_of_it() -> None:
    run = [f"p{i}" for i in range(150)]
    stopped = first_stop(run * 5)
    assert stopped is not None
    assert 450 <= stopped <= 458


def test_answers_that_do_not_repeat_are_never_stopped() -> None:
    counting = [piece for n in range(3000) for piece in (str(n), ",", " ")]  # alike, never the same
    assert first_stop(counting) is None
    dashes = ["-"] * (LEAST_SPAN - 20) + ["x"] * 10  # a rule shorter than the least span
    assert first_stop(dashes) is None


def test_sampled_answers_are_stopped_only_well_past_what_text_repeats() -> None:
    sampled = watch_of({"temperature": 1.0})
    assert sampled is not None
    assert sampled.least_span == SAMPLED_SPAN
    sentence = [f"s{i}" for i in range(20)]  # "[1] The server returned a response…", over and over
    stopped = first_stop([f"w{i}" for i in range(30)] + sentence * 200, sampled)
    assert stopped is not None
    assert 30 + SAMPLED_SPAN <= stopped <= 30 + SAMPLED_SPAN + 8
    rows = [piece for n in range(40) for piece in ("| ", "row", " |", " x", "\n")]  # five rows' worth
    assert first_stop(rows * 3 + [f"e{i}" for i in range(500)], watch_of({})) is None
    greedy = watch_of({"temperature": 0})
    assert greedy is not None
    assert greedy.least_span == LEAST_SPAN


def test_answers_that_asked_for_their_whole_length_are_not_watched() -> None:
    assert watch_of({"top_k": 1, "temperature": 0.8}) is not None
    assert watch_of({"temperature": 0, "ignore_eos": True}) is None
