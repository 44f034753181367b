"""modelport: open-source models behind the OpenAI API, over HTTP or in-process."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "AsyncOpenAI",
    "Capability",
    "ModelRegistry",
    "OpenAI",
    "Parameter",
    "Settings",
    "__version__",
    "check_predictor",
]

if TYPE_CHECKING:
    from modelport.client import AsyncOpenAI, OpenAI
    from modelport.predictors import Capability, ModelRegistry, Parameter, check_predictor
    from modelport.settings import Settings

_LAZY = {
    "OpenAI": "modelport.client",
    "AsyncOpenAI": "modelport.client",
    "Parameter": "modelport.predictors",
    "Capability": "modelport.predictors",
    "ModelRegistry": "modelport.predictors",
    "check_predictor": "modelport.predictors",
    "Settings": "modelport.settings",
}


def __getattr__(name: str) -> Any:
    # Lazy, so `import modelport` stays fast and a predictor module importing `Parameter` pulls no server.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'modelport' has no attribute {name!r}")
