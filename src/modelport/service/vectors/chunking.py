"""Cutting a file's text into chunks the store's embedding model reads whole.

OpenAI's `auto` strategy is 800-token chunks overlapping by 400. An embedding model reads only so many
tokens (all-MiniLM-L6-v2: 256, two of them its own [CLS] and [SEP]) and silently drops the rest, so here
`auto` is the largest chunk the model reads whole (254 tokens for all-MiniLM-L6-v2), overlapping by half as
OpenAI's does; a `static` strategy asking for more than the model reads is refused, never truncated. Tokens
are the model's own (its tokenizer's spans, `TokenSpans`); a model that cannot show them (one served
elsewhere) is assumed to read 512 tokens of about four characters each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelport.errors import InvalidRequestError

_FALLBACK_TOKENS = 512
_CHARACTERS_PER_TOKEN = 4
_SPECIAL_TOKENS = 2  # the start and end tokens a BERT-style model adds to every text


@dataclass(frozen=True)
class EmbeddingReader:
    """What an embedding model reads: how many tokens at once, and where a text's tokens fall (None when
    the model cannot show it)."""

    max_tokens: int = _FALLBACK_TOKENS
    spans: Callable[[str], list[tuple[int, int]]] | None = None

    @property
    def chunk_limit(self) -> int:
        """The most tokens of text a chunk may have and still be read whole."""
        return self.max_tokens - _SPECIAL_TOKENS if self.spans is not None else self.max_tokens


def strategy(given: dict[str, Any] | None, reader: EmbeddingReader, param: str) -> dict[str, Any]:
    """A `chunking_strategy` as stored and shown: always `static` with its sizes (`auto` made concrete for
    the model), or a 400 naming what is out of range."""
    if given is not None and not isinstance(given, dict):
        raise InvalidRequestError(f"{param} must be an object.", param=param, code="invalid_type")
    kind = (given or {}).get("type", "auto")
    if kind == "auto":
        size = min(800, reader.chunk_limit)
        return {
            "type": "static",
            "static": {"max_chunk_size_tokens": size, "chunk_overlap_tokens": size // 2},
        }
    if kind != "static" or not isinstance((given or {}).get("static"), dict):
        raise InvalidRequestError(
            f"{param} must be {{type: auto}} or {{type: static, static: {{max_chunk_size_tokens, "
            "chunk_overlap_tokens}}}.",
            param=param,
        )
    static = (given or {})["static"]
    size, overlap = static.get("max_chunk_size_tokens"), static.get("chunk_overlap_tokens")
    if not isinstance(size, int) or isinstance(size, bool) or not 100 <= size <= 4096:
        raise InvalidRequestError(
            f"{param}.static.max_chunk_size_tokens must be an integer from 100 to 4096.",
            param=f"{param}.static.max_chunk_size_tokens",
            code="invalid_value",
        )
    if size > reader.chunk_limit:
        raise InvalidRequestError(
            f"{param}.static.max_chunk_size_tokens is {size}, but this vector store's embedding model "
            f"reads {reader.chunk_limit} tokens of text at most: a longer chunk would be cut short.",
            param=f"{param}.static.max_chunk_size_tokens",
            code="invalid_value",
        )
    if not isinstance(overlap, int) or isinstance(overlap, bool) or not 0 <= overlap <= size // 2:
        raise InvalidRequestError(
            f"{param}.static.chunk_overlap_tokens must be an integer from 0 to half of "
            f"max_chunk_size_tokens ({size // 2}).",
            param=f"{param}.static.chunk_overlap_tokens",
            code="invalid_value",
        )
    return _static(size, overlap)


def chunks(text: str, chunking: dict[str, Any], reader: EmbeddingReader) -> list[str]:
    """`text` in windows of at most `max_chunk_size_tokens` tokens, each starting `overlap` tokens before
    the last one ended."""
    static = chunking["static"]
    size, overlap = static["max_chunk_size_tokens"], static["chunk_overlap_tokens"]
    spans = reader.spans(text) if reader.spans is not None else _guessed_spans(text)
    pieces = []
    start = 0
    while start < len(spans):
        end = min(start + size, len(spans))
        piece = text[spans[start][0] : spans[end - 1][1]].strip()
        if piece:
            pieces.append(piece)
        if end == len(spans):
            break
        start = end - overlap
    return pieces


def _guessed_spans(text: str) -> list[tuple[int, int]]:
    return [
        (start, min(start + _CHARACTERS_PER_TOKEN, len(text)))
        for start in range(0, len(text), _CHARACTERS_PER_TOKEN)
    ]


def _static(size: int, overlap: int) -> dict[str, Any]:
    return {"type": "static", "static": {"max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap}}
