"""Which engine serves a model file or folder, and with which options: what lets `modelport serve PATH`
work without a models.toml. Each check looks at the files themselves, so a wrong path fails here, naming
the file, before a server starts."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelport.engines import gguf_header

Options = dict[str, Any]
_SPLIT = re.compile(r"-\d{5}-of-\d{5}$")


def _gguf(path: Path) -> Options | None:
    if path.is_dir():
        found = [p for p in sorted(path.glob("*.gguf")) if "mmproj" not in p.name.lower()]
        if len(found) != 1:
            return None
        path = found[0]
    if path.suffix != ".gguf":
        with open(path, "rb") as file:
            if file.read(4) != b"GGUF":
                return None
    gguf_header.read(path)  # not a GGUF after all, or a damaged header: fails here, naming the file
    return {"path": str(path)}


def _piper(path: Path) -> Options | None:
    if path.is_file() and path.suffix == ".onnx" and path.with_name(path.name + ".json").is_file():
        return {"model": str(path)}
    return None


def _onnx_embedding(path: Path) -> Options | None:
    folder = path if path.is_dir() else path.parent
    candidates = [path] if path.is_file() else [folder / "model.onnx", folder / "onnx" / "model.onnx"]
    model = next((p for p in candidates if p.suffix == ".onnx" and p.is_file()), None)
    tokenizer = folder / "tokenizer.json"
    if model is None or not tokenizer.is_file():
        return None
    return {"model": str(model), "tokenizer": str(tokenizer)}


def _ctranslate2_whisper(path: Path) -> Options | None:
    files = ("model.bin", "config.json")
    vocabularies = ("vocabulary.txt", "vocabulary.json", "tokenizer.json")
    if all((path / f).is_file() for f in files) and any((path / v).is_file() for v in vocabularies):
        return {"model": str(path)}
    return None


# In the order they are tried: a Piper voice is an .onnx file too, told apart by its .onnx.json.
RECOGNISERS: dict[str, tuple[Callable[[Path], Options | None], str]] = {
    "llamacpp": (_gguf, "a GGUF file (or a folder holding one)"),
    "piper": (_piper, "a Piper voice: NAME.onnx with NAME.onnx.json beside it"),
    "onnx-embedding": (_onnx_embedding, "an ONNX model with tokenizer.json in its folder"),
    "faster-whisper": (_ctranslate2_whisper, "a CTranslate2 Whisper folder (model.bin, config.json)"),
}


def recognise(path: Path, engine: str | None = None) -> tuple[str, Options]:
    """The engine and its options for a model at `path`; `engine` when given (a plug-in engine gets the
    path as its `path` option). A `ValueError` that names the file and what was expected otherwise."""
    if not path.exists():
        raise ValueError(f"{path}: no such file or folder")
    if not (path.is_dir() or _readable(path)):
        raise ValueError(f"{path}: cannot be read")
    if engine is not None and engine not in RECOGNISERS:
        return engine, {"path": str(path)}
    tried = {engine: RECOGNISERS[engine]} if engine else RECOGNISERS
    for name, (check, _) in tried.items():
        try:
            options = check(path)
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: {error}") from None
        if options is not None:
            return name, options
    expected = "; or ".join(what for _, what in tried.values())
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
