"""Engines: backends that turn a model's options into predictors.

Every engine, built-in or third-party, is found the same way: under the `modelport.engines` entry-point
group (modelport's own are listed once, in its package metadata). An entry point names an `Engine`, or
just a factory function (its other abilities then take their defaults). Each engine module imports its
heavy backend lazily, inside its factory.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

GROUP = "modelport.engines"
Options = dict[str, Any]


def _one(_: Options) -> int:
    return 1


def _fraction(_: Options) -> float:
    return 0.2


@dataclass(frozen=True)
class Engine:
    """A backend: `load(**options)` returns its predictors (functions or objects, checked when the model
    loads, or `Predictor`s already checked), and what else modelport may ask of it."""

    load: Callable[..., Sequence[Any]]
    # Bytes a model will take once loaded, from its options, before it loads; else its files' size.
    estimate: Callable[..., int] | None = None
    # The options for a model file or folder of this engine's, or None: `modelport serve PATH`.
    recognise: Callable[[Path], Options | None] | None = None
    recognises: str = ""  # what `recognise` looks for, in words, for the error when nothing matches
    concurrency: Callable[[Options], int] = _one  # calls a model of it takes at once, by default
    # CPUs a Ray replica of a model of it reserves by default: what it keeps busy (most engines compute in
    # short bursts between requests; a generating GGUF keeps its threads busy).
    cpus: Callable[[Options], float] = _fraction
    # The options a `load(**options)` passes on, for `check_options` (a `load` naming its own is read).
    takes: tuple[str, ...] = ()

    def check_options(self, options: Options, model_id: str, name: str) -> None:
        """A ValueError naming an option `load` does not take, with the one it likely meant and those it
        takes: a misspelt option in models.toml is refused when the server starts, not found at the first
        request as a model that failed to load. A `load(**options)` is checked against `takes`, if given."""
        parameters = inspect.signature(self.load).parameters.values()
        takes = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if any(p.kind is p.VAR_KEYWORD for p in parameters):
            if not self.takes:
                return
            takes += [name for name in self.takes if name not in takes]
        for option in options:
            if option not in takes:
                close = difflib.get_close_matches(option, takes, n=1)
                meant = f" (did you mean `{close[0]}`?)" if close else ""
                raise ValueError(
                    f"model `{model_id}`: the {name} engine has no option `{option}`{meant}; it takes "
                    f"{', '.join(takes) or 'none'}"
                )

    def memory(self, options: Options) -> int:
        """Bytes a model with these options will take once loaded."""
        if self.estimate is not None:
            return int(self.estimate(**options))
        paths = [
            Path(v).expanduser() for v in options.values() if isinstance(v, str) and v and "://" not in v
        ]
        return files_size(p for p in paths if p.exists())


def engine_names() -> list[str]:
    """Every engine name modelport can find."""
    return sorted({ep.name for ep in entry_points(group=GROUP)})


def engine(name: str) -> Engine:
    """The engine registered under `name`; a clear error listing the known ones otherwise."""
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            found = ep.load()
            return found if isinstance(found, Engine) else Engine(found)
    raise ValueError(f"unknown engine `{name}`; known engines: {', '.join(engine_names())}")


def files_size(paths: Iterable[Path]) -> int:
    """Bytes on disk of these files, and of everything inside these folders."""
    size = 0
    for path in paths:
        if path.is_dir():
            size += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            size += path.stat().st_size
    return size
