"""Rules of the house that neither ruff, mypy nor import-linter checks, read from the package's source."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import modelport

SOURCE = Path(modelport.__file__).parent


def test_no_two_classes_have_one_name() -> None:
    # One name, one class: a reader who finds `Thinking` or `Reader` in a signature knows which it is
    # without following the import, and a search for the class finds only it.
    where: collections.defaultdict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(SOURCE)}:{node.lineno}")
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert not twice, f"classes of one name: {twice}"
