"""Which engine serves a model file or folder, and with which options: what lets `modelport serve PATH`
work without a models.toml. Each engine's own recogniser looks at the files themselves, so a wrong path
fails here, naming the file, before a server starts."""

from __future__ import annotations

import re
from pathlib import Path

from modelport.engines import Engine, Options, engine, engine_names

_SPLIT = re.compile(r"-\d{5}-of-\d{5}$")


def recognise(path: Path, name: str | None = None) -> tuple[str, Options]:
    """The engine and its options for a model at `path`; `name`'s when given (an engine that recognises no
    files gets the path as its `path` option). A `ValueError` that names the file and what was expected
    otherwise."""
    if not path.exists():
        raise ValueError(f"{path}: no such file or folder")
    if not (path.is_dir() or _readable(path)):
        raise ValueError(f"{path}: cannot be read")
    engines: dict[str, Engine] = {n: engine(n) for n in ([name] if name else engine_names())}
    tried = {n: e for n, e in engines.items() if e.recognise is not None}
    if name is not None and not tried:
        return name, {"path": str(path)}
    for found, each in tried.items():
        assert each.recognise is not None
        try:
            options = each.recognise(path)
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: {error}") from None
        if options is not None:
            return found, options
    expected = "; or ".join(each.recognises for each in tried.values())
    raise ValueError(f"{path}: not a model modelport recognises; expected {expected}")


def model_id(path: Path) -> str:
    """A model's id from its path: the file's stem (without a split file's part number), or the folder's
    name."""
    return _SPLIT.sub("", path.stem) if path.is_file() else path.name


def _readable(path: Path) -> bool:
    try:
        with open(path, "rb"):
            return True
    except OSError:
        return False
