"""A plugin (tests/conftest.py loads it): a test module whose own marks (`pytestmark`) leave every test in it
out of the run's `-m` expression is not imported. Each worker imports every module it collects before
`-m` deselects anything: the modules of the slow tier cost each worker of the unit tier (`-m "not slow and
not models"`) 1.2-1.6 s of its 9-11 s of collecting (the fuzzers build their shapes as they load)."""

from __future__ import annotations

import ast
import itertools
import keyword
import re
from pathlib import Path

import pytest

_MODULE_MARKS = re.compile(r"^pytestmark\s*=", re.MULTILINE)
_EXPRESSION = re.compile(r"(\s+|\(|\)|and\b|or\b|not\b|[A-Za-z_]\w*)")
_OPERATORS = {"and", "or", "not"}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    expression = config.getoption("markexpr", "")
    if not expression or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    names = _names(expression)
    if names is None:
        return None
    marks = module_marks(collection_path.read_text(encoding="utf-8"))
    if not marks:
        return None
    return True if never_selected(expression, names, marks) else None


def module_marks(source: str) -> set[str]:
    """The marks a module's `pytestmark` gives every test in it (`pytest.mark.NAME`, alone or in a list)."""
    found = _MODULE_MARKS.search(source)
    if found is None:
        return set()
    lines = source[found.start() :].splitlines()
    for end in range(1, min(len(lines), 20) + 1):  # the statement's lines: a list may span several
        try:
            statement = ast.parse("\n".join(lines[:end]))
        except SyntaxError:
            continue
        return {
            node.attr
            for node in ast.walk(statement)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "mark"
        }
    return set()


def never_selected(expression: str, names: set[str], marks: set[str]) -> bool:
    """Whether `-m expression` selects no test that has `marks`, whatever other marks the test has."""
    free = sorted(names - marks)
    for values in itertools.product((False, True), repeat=len(free)):
        known = dict.fromkeys(names & marks, True) | dict(zip(free, values, strict=True))
        if eval(expression, {"__builtins__": {}}, known):  # names and operators only (`_names`)
            return False
    return True


def _names(expression: str) -> set[str] | None:
    """The mark names of an expression of names, `and`, `or`, `not` and parentheses (None for any other,
    such as a mark's arguments: such a run collects every module)."""
    tokens = _EXPRESSION.findall(expression)
    names = {token for token in tokens if token.strip() and token not in _OPERATORS and token not in "()"}
    if "".join(tokens) != expression or any(keyword.iskeyword(name) for name in names):
        return None
    return names
