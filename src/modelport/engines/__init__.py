"""Engines: backends that turn a model's options into predictors.

Every engine, built-in or third-party, is found the same way: under the `modelport.engines` entry-point
group (modelport's own are listed once, in its package metadata). An entry point names an `Engine`, or
just a factory function (its other abilities then take their defaults). Each engine module imports its
heavy backend lazily, inside its factory.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import pydantic

from modelport.config_errors import explained, meant

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
    # What a model's files say it is (a GGUF's header: architecture, training context, sizes), from its
    # options, without loading it: Ollama's `/api/show` gives it as `model_info`.
    describe: Callable[..., dict[str, Any]] | None = None
    # The options for a model file or folder of this engine's, or None: `modelport serve PATH`.
    recognise: Callable[[Path], Options | None] | None = None
    recognises: str = ""  # what `recognise` looks for, in words, for the error when nothing matches
    concurrency: Callable[[Options], int] = _one  # calls a model of it takes at once, by default
    # CPUs a Ray replica of a model of it reserves by default: what it keeps busy (most engines compute in
    # short bursts between requests; a generating GGUF keeps its threads busy).
    cpus: Callable[[Options], float] = _fraction
    # Where `load(**options)` passes its options on: the function whose parameters they are (their names
    # and types), less those `load` gives it itself. Else `load`'s own parameters are its options.
    takes: Callable[..., Any] | None = None
    withheld: tuple[str, ...] = ()

    def check_options(self, options: Options, model_id: str, name: str) -> None:
        """A ValueError naming an option a model gives that the engine does not take (with the one it likely
        meant, and those it takes) or takes of another type (its annotation): a mistake in models.toml
        stops the start, where it was found at the first request as a model that failed to load (a 500).
        An engine whose `load(**options)` says nothing of them (no `takes`) is its own to check."""
        schema = _options_schema(self, name)
        if schema is None:
            return
        try:
            schema.model_validate(options)
        except pydantic.ValidationError as error:
            unknown = [str(e["loc"][0]) for e in error.errors() if e["type"] == "extra_forbidden"]
            if not unknown:
                raise ValueError(explained(error, schema, f"model `{model_id}`")) from None
            fields = schema.model_fields
            option, takes = unknown[0], ", ".join(fields) or "none"
            raise ValueError(
                f"model `{model_id}`: the {name} engine has no option `{option}`{meant(option, fields)}; "
                f"it takes {takes}"
            ) from None

    def memory(self, options: Options) -> int:
        """Bytes a model with these options will take once loaded."""
        if self.estimate is not None:
            return int(self.estimate(**options))
        paths = [
            Path(v).expanduser() for v in options.values() if isinstance(v, str) and v and "://" not in v
        ]
        return files_size(p for p in paths if p.exists())


# Options are checked as given (TOML's types), not converted: `load` receives them as they are.
_OPTIONS = pydantic.ConfigDict(
    extra="forbid", strict=True, protected_namespaces=(), arbitrary_types_allowed=True
)


@functools.cache  # once an engine: ~5 ms each, and a registry (of every model) is built at every start
def _options_schema(engine: Engine, name: str) -> type[pydantic.BaseModel] | None:
    """The options `engine` takes as a model to validate them with (each parameter's annotation and
    default); None where `load(**options)` says nothing of them."""
    fields: dict[str, Any] = {}
    for function in (engine.load, engine.takes):
        if function is None:
            continue
        try:
            hints = typing.get_type_hints(function)
        except (NameError, TypeError):  # an annotation only a type checker imports: any value then
            hints = {}
        for p in inspect.signature(function).parameters.values():
            if p.kind is p.VAR_KEYWORD and engine.takes is None:
                return None
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in engine.withheld:
                default = ... if p.default is p.empty else p.default
                fields.setdefault(p.name, (hints.get(p.name, Any), default))
    return pydantic.create_model(f"the {name} engine's options", __config__=_OPTIONS, **fields)


@functools.cache
def _registered() -> dict[str, EntryPoint]:
    """The engines installed, by name, read once a process: listing them reads the metadata of every
    installed distribution (8-40 ms), which each model of a registry and each path recognised paid again."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def engine_names() -> list[str]:
    """Every engine name modelport can find."""
    return sorted(_registered())


def engine(name: str) -> Engine:
    """The engine registered under `name`; a clear error listing the known ones otherwise."""
    ep = _registered().get(name)
    if ep is not None:
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
