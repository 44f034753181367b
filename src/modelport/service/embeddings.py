"""Embeddings: texts → the predictor's (N, D) float32 matrix → OpenAI's response, float or base64."""

from __future__ import annotations

import asyncio
import base64
import contextvars
from dataclasses import dataclass, field

import numpy as np
from openai.types import CreateEmbeddingResponse, Embedding

from modelport import context, metrics
from modelport.errors import InvalidRequestError, OverloadedError, PredictorError
from modelport.predictors.contract import Predictor
from modelport.predictors.manager import LoadedModel
from modelport.protocol.requests import EmbeddingRequest
from modelport.service import calls
from modelport.service.generation import token_ids

_DIMS = "openai.embeddings.dims"


async def embeddings(
    model: LoadedModel, predictor: Predictor, request: EmbeddingRequest
) -> CreateEmbeddingResponse:
    """Embed the input texts; `dimensions` truncates and re-normalises unless the predictor takes it."""
    entries = token_ids.inputs(request.input)
    if any(t == "" for t in entries):
        raise InvalidRequestError("input must not contain empty strings.", param="input")
    strings = await token_ids.openai_texts(entries, "input")
    if not request.truncate:
        _check_lengths(predictor, strings)
    batcher = model.state.get("embedding-batcher")
    if batcher is None or batcher.loop is not asyncio.get_running_loop():
        batcher = model.state["embedding-batcher"] = Batcher(model, predictor)
    matrix, tokens = await batcher.embed(strings, request.dimensions)
    matrix = _checked(matrix, predictor, len(strings))
    if request.dimensions is not None:
        matrix = _truncated(matrix, request.dimensions, predictor)
    # pydantic-core checks a row of floats in microseconds, where the SDK's construct (which a base64 string
    # needs, since it breaks the float type) takes ~0.1 s for 64 rows.
    if request.encoding_format == "base64":
        data = [
            Embedding.construct(
                object="embedding", index=i, embedding=base64.b64encode(row.astype("<f4").tobytes()).decode()
            )
            for i, row in enumerate(matrix)
        ]
    else:
        data = [
            Embedding.model_validate({"object": "embedding", "index": i, "embedding": row.tolist()})
            for i, row in enumerate(matrix)
        ]
    metrics.count_tokens(model.spec.id, {"prompt_tokens": tokens})
    return CreateEmbeddingResponse.model_validate(
        {
            "object": "list",
            "data": data,
            "model": model.spec.id,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


def _check_lengths(predictor: Predictor, texts: list[str]) -> None:
    """A 400 for an input longer than the model reads at once (where its predictor says how long that is:
    the built-in embedders do; another is taken at its word)."""
    spans = predictor.token_spans
    if spans is None:
        return
    specials = predictor.token_counter.count_tokens([""]) if predictor.token_counter is not None else 0
    for i, text in enumerate(texts):
        length = len(spans.token_spans(text)) + specials
        if length > spans.max_tokens:
            raise InvalidRequestError(
                f"input[{i}] is {length} tokens, more than the {spans.max_tokens} this model reads at once "
                "(`truncate` true, the default, cuts an input to them).",
                param="input",
                code="context_length_exceeded",
            )


@dataclass(eq=False)  # entries are told apart by identity: two callers may send the same texts
class _Entry:
    """One caller's part of a batch: its texts, its `dimensions`, whether it is background work, and where
    its rows and token count go."""

    texts: list[str]
    dimensions: int | None
    background: bool
    future: asyncio.Future[tuple[np.ndarray, int]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Batcher:
    """Runs the texts of concurrent callers through the model together: after a short window (and while a
    batch runs), callers that arrive join the next batch, which is one predictor call.

    Live callers go first. Background work (a vector store's ingest, a batch's lines) is cut into calls of
    at most `background_texts` and each waits behind every live caller, so a live request on a model that
    a large ingest is feeding waits for one small call, not for the ingest's whole queue."""

    window = 0.001  # seconds the first caller waits for others to join
    max_texts = 256  # a batch closes at this many texts (one bigger request still runs whole)
    background_texts = 16

    def __init__(self, model: LoadedModel, predictor: Predictor) -> None:
        self.model = model
        self.predictor = predictor
        self.loop = asyncio.get_running_loop()
        self.pending: list[_Entry] = []
        self.worker: asyncio.Task[None] | None = None

    async def embed(self, texts: list[str], dimensions: int | None) -> tuple[np.ndarray, int]:
        """The rows for `texts` and their token count, computed in a batch with whoever else is waiting."""
        if not context.current().background:
            if sum(not entry.background for entry in self.pending) >= self.model.slots.queue + 1:
                raise OverloadedError(self.model.spec.id, self.model.slots.retry_after())
            return await self._queued(_Entry(texts, dimensions, background=False))
        rows: list[np.ndarray] = []
        tokens = 0
        for start in range(0, len(texts), self.background_texts):
            part = texts[start : start + self.background_texts]
            matrix, count = await self._queued(_Entry(part, dimensions, background=True))
            rows.append(matrix)
            tokens += count
        return np.concatenate(rows), tokens

    async def _queued(self, entry: _Entry) -> tuple[np.ndarray, int]:
        self.pending.append(entry)
        if self.worker is None or self.worker.done():
            # In a context of its own: a task inherits its creator's, and the batches it runs for later
            # callers must not run as the first caller's (background work, or its project).
            self.worker = asyncio.create_task(self._work(), context=contextvars.Context())
        return await entry.future

    async def _work(self) -> None:
        while self.pending:
            await asyncio.sleep(self.window)
            # A caller that went away (its future cancelled) is dropped: nobody waits for its rows.
            self.pending = [entry for entry in self.pending if not entry.future.done()]
            if not self.pending:
                return
            background = all(entry.background for entry in self.pending)
            most = self.background_texts if background else self.max_texts
            batch: list[_Entry] = []
            size = 0
            for entry in self.pending:  # in order of arrival, up to the first that does not fit
                if entry.background != background:
                    continue
                if batch and size + len(entry.texts) > most:
                    break
                batch.append(entry)
                size += len(entry.texts)
            self.pending = [entry for entry in self.pending if entry not in batch]
            # Only callers asking for the same `dimensions` (when the predictor takes it) share a call.
            groups: dict[int | None, list[_Entry]] = {}
            for entry in batch:
                key = entry.dimensions if self.predictor.accepts(_DIMS) else None
                groups.setdefault(key, []).append(entry)
            for dimensions, group in groups.items():
                if background:  # held as background work: the model's slots keep room for live calls
                    own = contextvars.Context()
                    own.run(context.enter, context.RequestContext(background=True))
                    await asyncio.create_task(self._run(dimensions, group), context=own)
                else:
                    await self._run(dimensions, group)

    async def _run(self, dimensions: int | None, group: list[_Entry]) -> None:
        texts = [text for entry in group for text in entry.texts]
        counter = self.predictor.token_counter

        def run() -> tuple[np.ndarray, list[int]]:
            matrix = self.predictor(texts, {_DIMS: dimensions})
            return matrix, [counter.count_tokens(entry.texts) if counter else 0 for entry in group]

        try:
            matrix, tokens = await calls.call(self.model, self.predictor, run)
            matrix = _checked(matrix, self.predictor, len(texts))
        except Exception as error:
            for entry in group:
                if not entry.future.done():
                    entry.future.set_exception(error)
            return
        start = 0
        for entry, count in zip(group, tokens, strict=True):
            if not entry.future.done():  # a caller that went away has cancelled its future
                entry.future.set_result((matrix[start : start + len(entry.texts)], count))
            start += len(entry.texts)


def _checked(matrix: object, predictor: Predictor, rows: int) -> np.ndarray:
    if (
        not isinstance(matrix, np.ndarray)
        or matrix.dtype != np.float32
        or matrix.ndim != 2
        or len(matrix) != rows
    ):
        shown = (
            f"{matrix.dtype} array of shape {matrix.shape}"
            if isinstance(matrix, np.ndarray)
            else type(matrix).__name__
        )
        raise PredictorError(
            f"predictor `{predictor.name}` returned {shown}; expected float32 of shape ({rows}, D)"
        )
    return matrix


def _truncated(matrix: np.ndarray, dimensions: int, predictor: Predictor) -> np.ndarray:
    size = matrix.shape[1]
    if predictor.accepts(_DIMS):
        if size != dimensions:
            raise PredictorError(
                f"predictor `{predictor.name}` was asked for {dimensions} dimensions and returned {size}"
            )
        return matrix
    if dimensions > size:
        raise InvalidRequestError(
            f"dimensions must be at most {size} for this model, got {dimensions}.", param="dimensions"
        )
    cut = matrix[:, :dimensions]
    normalised: np.ndarray = cut / np.clip(np.linalg.norm(cut, axis=1, keepdims=True), 1e-12, None)
    return normalised.astype(np.float32)
