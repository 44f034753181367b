"""A module imported where a test first uses it rather than when its file is collected: every pytest-xdist
worker collects every test file, whichever tier runs, so a large SDK imported at the top of one file is paid
by each worker (the `anthropic` package: 1.1 s of pydantic models)."""

from __future__ import annotations

import importlib
from typing import Any


class Imported:
    """`name`'s attributes, the module imported at the first one asked for."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):  # what collection asks of every name in a test file (`__test__`,
            raise AttributeError(attribute)  # `_mock_name`, …): a module's public names have no underscore
        return getattr(importlib.import_module(self._name), attribute)
