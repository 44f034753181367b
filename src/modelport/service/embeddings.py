"""Embeddings: texts → the predictor's (N, D) float32 matrix → OpenAI's response, float or base64."""

from __future__ import annotations

import base64

import numpy as np
from openai.types import CreateEmbeddingResponse, Embedding
from openai.types.create_embedding_response import Usage

from modelport.errors import InvalidRequestError, PredictorError
from modelport.predictors.contract import Capability, Predictor
from modelport.predictors.manager import ModelManager
from modelport.protocol.requests import EmbeddingRequest
from modelport.service import calls

_DIMS = "openai.embeddings.dims"


async def embeddings(manager: ModelManager, request: EmbeddingRequest) -> CreateEmbeddingResponse:
    """Embed the input texts; `dimensions` truncates and re-normalises unless the predictor takes it."""
    model = await manager.get(request.model)
    predictor = model.predictor(Capability.EMBEDDING)
    texts = [request.input] if isinstance(request.input, str) else request.input
    if not all(isinstance(t, str) for t in texts):
        raise InvalidRequestError(
            "Token-array input is not supported; send the input as text.", param="input"
        )
    if any(t == "" for t in texts):
        raise InvalidRequestError("input must not contain empty strings.", param="input")
    strings: list[str] = [str(t) for t in texts]

    def run() -> tuple[np.ndarray, int]:
        matrix = predictor(strings, {_DIMS: request.dimensions})
        counter = getattr(predictor.fn, "count_tokens", None)
        return matrix, counter(strings) if counter else 0

    matrix, tokens = await calls.call(model, predictor, run)
    matrix = _checked(matrix, predictor, len(strings))
    if request.dimensions is not None:
        matrix = _truncated(matrix, request.dimensions, predictor)
    # Built without validation, as the SDK itself does: with base64, `embedding` holds the string.
    data = [
        Embedding.model_construct(
            object="embedding",
            index=i,
            embedding=base64.b64encode(row.astype("<f4").tobytes()).decode()
            if request.encoding_format == "base64"
            else row.tolist(),
        )
        for i, row in enumerate(matrix)
    ]
    return CreateEmbeddingResponse.model_construct(
        object="list", data=data, model=model.spec.id, usage=Usage(prompt_tokens=tokens, total_tokens=tokens)
    )


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
