"""The plugin that leaves unimported the test modules a run's `-m` deselects whole (tests/support)."""

from __future__ import annotations

import pytest

from tests.support.deselected_modules import _names, module_marks, never_selected


def test_a_module_s_own_marks_are_read_alone_or_listed() -> None:
    assert module_marks("import pytest\n\npytestmark = pytest.mark.slow  # why\n") == {"slow"}
    listed = "pytestmark = [\n    pytest.mark.slow,\n    pytest.mark.whole_machine,\n]\nX = pytest.mark.x\n"
    assert module_marks(listed) == {"slow", "whole_machine"}
    assert module_marks("@pytest.mark.slow\ndef test_one() -> None: ...\n") == set()


@pytest.mark.parametrize(
    ("expression", "marks", "skipped"),
    [
        ("not slow and not models", {"slow"}, True),
        ("not slow and not models", {"whole_machine"}, False),  # its tests may have neither
        ("slow", {"models"}, False),  # a test in it may be marked slow itself
        ("not (slow or models)", {"models", "one_face"}, True),
        ("models and not slow", {"slow", "models"}, True),
    ],
)
def test_a_module_is_left_out_only_where_no_test_of_it_can_be_selected(
    expression: str, marks: set[str], skipped: bool
) -> None:
    names = _names(expression)
    assert names is not None
    assert never_selected(expression, names, marks) is skipped


def test_an_expression_of_other_shapes_collects_every_module() -> None:
    assert _names("slow(reason=1)") is None
    assert _names("not True") is None
    assert _names("slow; import os") is None
