"""Engines: factories that turn a model's options into predictor functions.

Built-in engines are listed here; third-party packages add theirs under the `modelport.engines` entry
point group. Each engine module imports its heavy backend lazily, inside its factory.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any

# An engine returns predictor functions (checked, capability inferred) or already checked `Predictor`s.
EngineFactory = Callable[..., Sequence[Any]]

_BUILTIN = {
    "llamacpp": "modelport.engines.llamacpp:load",
    "onnx-embedding": "modelport.engines.onnx_embedding:load",
    "piper": "modelport.engines.piper:load",
    "faster-whisper": "modelport.engines.faster_whisper:load",
    "espeak-ng": "modelport.engines.espeak:load",
}


def engine_names() -> list[str]:
    """Every engine name modelport can find."""
    return sorted(set(_BUILTIN) | {ep.name for ep in entry_points(group="modelport.engines")})


def engine_factory(name: str) -> EngineFactory:
    """The factory registered under `name`; a clear error listing the known ones otherwise."""
    for ep in entry_points(group="modelport.engines"):
        if ep.name == name:
            factory: EngineFactory = ep.load()
            return factory
    if name not in _BUILTIN:
        raise ValueError(f"unknown engine `{name}`; known engines: {', '.join(engine_names())}")
    module, _, attr = _BUILTIN[name].partition(":")
    factory = getattr(importlib.import_module(module), attr)
    return factory
