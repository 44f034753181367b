"""A GGUF file's metadata, read from its header in milliseconds.

The `gguf` package's reader also maps every tensor and turns each vocabulary entry into an array (about
3 s for a 49k-token vocabulary); checking a file given on the command line, or estimating a model's memory
before it loads, needs only the scalar keys, so arrays are stepped over here.
"""

from __future__ import annotations

import math
import mmap
import struct
from pathlib import Path
from typing import Any

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_LENGTH = struct.Struct("<Q")  # a string's length, before its bytes
_CONTROL = 3  # llama.cpp's token type of a special token, written as text only when asked to


class NotGGUFError(ValueError):
    """The file is not a GGUF model (or is cut short)."""


def read(path: Path) -> dict[str, Any]:
    """Every scalar and string key of the header (arrays are left out), or `NotGGUFError`."""
    return _read(path, counted=False)


def model_info(path: Path) -> dict[str, Any]:
    """The header as Ollama's `/api/show` gives it (`model_info`, which clients read a model's training
    context from: `<architecture>.context_length`): its scalars and strings but the chat template, and
    `general.parameter_count`, the tensors' elements summed where the header does not say it."""
    found = _read(path, counted=True)
    found.pop("tokenizer.chat_template", None)
    return found


def _read(path: Path, counted: bool) -> dict[str, Any]:
    try:
        with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            found, offset = _parse(data)
            if counted and "general.parameter_count" not in found:
                found["general.parameter_count"] = _parameters(data, offset)
            return found
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as error:
        if isinstance(error, NotGGUFError):
            raise
        raise NotGGUFError(
            f"{path} is not a readable GGUF file (its header is cut short or damaged)"
        ) from None


def control_tokens(path: Path, texts: tuple[str, ...]) -> frozenset[str]:
    """Which of `texts` are single control tokens of the GGUF's vocabulary (special tokens: a decoder
    writes them as text only when told to, and a grammar must name them as tokens)."""
    if not texts:
        return frozenset()
    wanted = set(texts)
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        found: dict[str, int] = {}
        kinds: dict[int, int] = {}
        _, _, count = struct.unpack_from("<IQQ", data, 4)
        offset = 24
        for _ in range(count):
            key, offset = _string(data, offset)
            (kind,), offset = struct.unpack_from("<I", data, offset), offset + 4
            if kind == _ARRAY:
                (item, length), offset = struct.unpack_from("<IQ", data, offset), offset + 12
                if item == _STRING:
                    for index in range(length):
                        text, offset = _string(data, offset)
                        if key == "tokenizer.ggml.tokens" and text in wanted:
                            found[text] = index
                    continue
                size = struct.calcsize(_SCALARS[item])
                if key == "tokenizer.ggml.token_type":
                    for index in found.values():
                        kinds[index] = struct.unpack_from(_SCALARS[item], data, offset + size * index)[0]
                offset += size * length
            elif kind == _STRING:
                offset = _string(data, offset)[1]
            else:
                offset += struct.calcsize(_SCALARS[kind])
    return frozenset(text for text, index in found.items() if kinds.get(index) == _CONTROL)


def _parse(data: mmap.mmap) -> tuple[dict[str, Any], int]:
    """The header's keys, and where the tensors' descriptions begin."""
    if data[:4] != b"GGUF":
        raise NotGGUFError("not a GGUF file: it does not begin with the bytes `GGUF`")
    version, _tensors, count = struct.unpack_from("<IQQ", data, 4)
    if version < 2:
        raise NotGGUFError(f"GGUF version {version} is too old for llama.cpp")
    offset, found = 24, {}
    for _ in range(count):
        key, offset = _string(data, offset)
        (kind,), offset = struct.unpack_from("<I", data, offset), offset + 4
        if kind == _ARRAY:
            (item, length), offset = struct.unpack_from("<IQ", data, offset), offset + 12
            if item == _STRING:
                offset = _past_strings(data, offset, length)
            else:
                offset += struct.calcsize(_SCALARS[item]) * length
        elif kind == _STRING:
            found[key], offset = _string(data, offset)
        else:
            fmt = _SCALARS[kind]
            found[key] = struct.unpack_from(fmt, data, offset)[0]
            offset += struct.calcsize(fmt)
    return found, offset


def _parameters(data: mmap.mmap, offset: int) -> int:
    """The elements of every tensor the header describes (each: its name, its dimensions, its type and
    where its data lies)."""
    (tensors,) = struct.unpack_from("<Q", data, 8)
    total = 0
    for _ in range(tensors):
        offset = _string(data, offset)[1]
        (dimensions,), offset = struct.unpack_from("<I", data, offset), offset + 4
        sizes = struct.unpack_from(f"<{dimensions}Q", data, offset)
        offset += 8 * dimensions + 4 + 8
        total += math.prod(sizes)
    return total


def _past_strings(data: mmap.mmap, offset: int, count: int) -> int:
    """Where `count` strings from `offset` end: each stepped over by its length, not read (a vocabulary's
    100,000 tokens and merges decoded were 60% of a header's reading)."""
    unpack = _LENGTH.unpack_from
    for _ in range(count):
        offset += 8 + unpack(data, offset)[0]
    return offset


def _string(data: mmap.mmap, offset: int) -> tuple[str, int]:
    (length,) = _LENGTH.unpack_from(data, offset)
    start = offset + 8
    return data[start : start + length].decode(), start + length
