"""Embeddings: texts → the predictor's (N, D) float32 matrix → OpenAI's response, float or base64."""

from __future__ import annotations

import asyncio
import base64

import numpy as np
from openai.types import CreateEmbeddingResponse, Embedding

from modelport import metrics
from modelport.errors import InvalidRequestError, OverloadedError, PredictorError
from modelport.predictors.contract import Predictor
from modelport.predictors.manager import LoadedModel
from modelport.protocol.requests import EmbeddingRequest
from modelport.service import calls
from modelport.service.generation import token_ids

_DIMS = "openai.embeddings.dims"
# One caller in a batch: its texts, its `dimensions`, and where its rows and token count go.
_Entry = tuple[list[str], int | None, "asyncio.Future[tuple[np.ndarray, int]]"]


async def embeddings(
    model: LoadedModel, predictor: Predictor, request: EmbeddingRequest
) -> CreateEmbeddingResponse:
    """Embed the input texts; `dimensions` truncates and re-normalises unless the predictor takes it."""
    entries = token_ids.inputs(request.input)
    if any(t == "" for t in entries):
        raise InvalidRequestError("input must not contain empty strings.", param="input")
    strings = await token_ids.openai_texts(entries, "input")
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


class Batcher:
    """Runs the texts of concurrent callers through the model together: after a short window (and while a
    batch runs), callers that arrive join the next batch, which is one predictor call."""

    window = 0.001  # seconds the first caller waits for others to join
    max_texts = 256  # a batch closes at this many texts (one bigger request still runs whole)

    def __init__(self, model: LoadedModel, predictor: Predictor) -> None:
        self.model = model
        self.predictor = predictor
        self.loop = asyncio.get_running_loop()
        self.pending: list[_Entry] = []
        self.worker: asyncio.Task[None] | None = None

    async def embed(self, texts: list[str], dimensions: int | None) -> tuple[np.ndarray, int]:
        """The rows for `texts` and their token count, computed in a batch with whoever else is waiting."""
        if len(self.pending) >= self.model.slots.queue + 1:
            raise OverloadedError(self.model.spec.id, self.model.slots.retry_after())
        future: asyncio.Future[tuple[np.ndarray, int]] = asyncio.get_running_loop().create_future()
        self.pending.append((texts, dimensions, future))
        if self.worker is None or self.worker.done():
            self.worker = asyncio.create_task(self._work())
        return await future

    async def _work(self) -> None:
        while self.pending:
            await asyncio.sleep(self.window)
            batch: list[_Entry] = []
            size = 0
            while self.pending and (not batch or size + len(self.pending[0][0]) <= self.max_texts):
                size += len(self.pending[0][0])
                batch.append(self.pending.pop(0))
            # Only callers asking for the same `dimensions` (when the predictor takes it) share a call.
            groups: dict[int | None, list[_Entry]] = {}
            for entry in batch:
                key = entry[1] if self.predictor.accepts(_DIMS) else None
                groups.setdefault(key, []).append(entry)
            for dimensions, group in groups.items():
                await self._run(dimensions, group)

    async def _run(self, dimensions: int | None, group: list[_Entry]) -> None:
        texts = [text for entry in group for text in entry[0]]
        counter = self.predictor.token_counter

        def run() -> tuple[np.ndarray, list[int]]:
            matrix = self.predictor(texts, {_DIMS: dimensions})
            return matrix, [counter.count_tokens(entry[0]) if counter else 0 for entry in group]

        try:
            matrix, tokens = await calls.call(self.model, self.predictor, run)
            matrix = _checked(matrix, self.predictor, len(texts))
        except Exception as error:
            for entry in group:
                if not entry[2].done():
                    entry[2].set_exception(error)
            return
        start = 0
        for entry, count in zip(group, tokens, strict=True):
            if not entry[2].done():  # a caller that went away has cancelled its future
                entry[2].set_result((matrix[start : start + len(entry[0])], count))
            start += len(entry[0])


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
