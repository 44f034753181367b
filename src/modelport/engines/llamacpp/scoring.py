"""Scoring a prompt with a GGUF model: each prompt token's log-probability given the tokens before it (what
`echo` with `logprobs` asks for, and what eval harnesses' multiple-choice tasks read).

llama.cpp's server reports log-probabilities of generated tokens only. A second llama.cpp instance over the
same file (its weights mapped, not copied) runs in embedding mode without pooling and gives each prompt
token's final hidden state; times the model's output matrix (dequantized from the GGUF with the `gguf`
package) and a log-softmax, those are the next-token log-probabilities the engine itself would compute.
Started on the first scoring request, so models that are never scored pay nothing.
"""

from __future__ import annotations

import secrets
import threading
from pathlib import Path
from typing import Any

import numpy as np

from modelport import machine
from modelport.engines.llamacpp import xllamacpp_loader
from modelport.engines.llamacpp.launch import SideDoor
from modelport.errors import InvalidRequestError
from modelport.predictors.abilities import ScoredToken

_ROWS = 128  # hidden states multiplied at a time: bounds the logits held to _ROWS × vocabulary floats


class Scorer:
    """Prompt scoring for one GGUF; thread-safe, one call at a time."""

    def __init__(self, gguf: Path, n_ctx: int) -> None:
        self.gguf = gguf
        self.n_ctx = n_ctx
        self._lock = threading.Lock()
        self._server: Any = None
        self._door: SideDoor | None = None
        self._key = secrets.token_urlsafe(32)
        self._output: np.ndarray | None = None
        self._softcap: float | None = None
        self._scale = 1.0
        self._pieces: dict[int, str] = {}  # token id -> its text, as llama.cpp spells it

    def score(self, prompt: str | list[int], k: int) -> list[ScoredToken]:
        """Every token of `prompt` (text, tokenized as the engine tokenizes it, or the model's token ids)."""
        return self.score_all([prompt], k)[0]

    def score_all(self, prompts: list[str | list[int]], k: int) -> list[list[ScoredToken]]:
        """`score` of each prompt. Their log-probabilities are computed together: each pass over the output
        matrix (113 MB for SmolLM2, read from memory whole) serves the rows of several prompts at once, where
        one at a time a short prompt paid a whole pass of its own."""
        with self._lock:
            self._start()
            ids = [self._tokens(prompt) for prompt in prompts]
            for one in ids:
                if len(one) > self.n_ctx:
                    raise InvalidRequestError(
                        f"Scoring a prompt (echo with logprobs) takes at most {self.n_ctx} tokens; this one "
                        f"has {len(one)}.",
                        param="prompt",
                        code="context_length_exceeded",
                    )
            # Each prompt's hidden states but its last, which predicts a token after the prompt (an empty
            # prompt, or one of a token alone, has none: llama.cpp refuses to embed no tokens).
            assert self._output is not None
            rows = [self._hidden(one)[: len(one) - 1] for one in ids if len(one) > 1]
            hidden = np.concatenate(rows) if rows else np.empty((0, self._output.shape[1]), np.float32)
            logprobs = self._logprobs(hidden, [token for one in ids for token in one[1:]], k)
            for _, best in logprobs:
                for token, _ in best:
                    self._piece(token)
            scored, start = [], 0
            for prompt, one in zip(prompts, ids, strict=True):
                scored.append(_scored(one, self._pieces, prompt, logprobs[start : start + len(one) - 1]))
                start += max(len(one) - 1, 0)
            return scored

    def _start(self) -> None:
        if self._server is not None:
            return
        xllamacpp = xllamacpp_loader.load()

        params = xllamacpp.CommonParams()
        params.model.path = str(self.gguf)
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_NONE
        params.n_parallel = 1
        params.n_ctx = self.n_ctx
        params.n_batch = params.n_ubatch = self.n_ctx  # a whole prompt in one pass, as embeddings need
        params.n_gpu_layers = 0
        params.verbosity = -1
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = machine.usable_cpus()
        params.api_keys = [self._key]
        self._read_output_matrix()
        self._server = xllamacpp.Server(params)
        self._door = SideDoor(self._server, self._key, timeout=600)

    def _read_output_matrix(self) -> None:
        import gguf

        reader = gguf.GGUFReader(self.gguf)
        tensors = {t.name: t for t in reader.tensors}
        # Models that tie their output to the input embedding have no `output.weight`.
        tensor = tensors.get("output.weight") or tensors["token_embd.weight"]
        rows = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        self._output = np.ascontiguousarray(rows, dtype=np.float32)
        arch = _field(reader, "general.architecture")
        softcap = _field(reader, f"{arch}.final_logit_softcapping")
        self._softcap = float(softcap) if softcap else None
        self._scale = float(_field(reader, f"{arch}.logit_scale") or 1.0)

    def _side_door(self, route: str, body: dict[str, Any]) -> Any:
        assert self._door is not None
        reply = self._door.post(route, body)
        reply.raise_for_status()
        return reply.json()

    def _tokens(self, prompt: str | list[int]) -> list[int]:
        if not isinstance(prompt, str):
            for token in prompt:
                self._piece(token)
            return list(prompt)
        found = self._side_door("/tokenize", {"content": prompt, "add_special": True, "with_pieces": True})
        for token in found["tokens"]:
            self._pieces.setdefault(int(token["id"]), _text(token["piece"]))
        return [int(t["id"]) for t in found["tokens"]]

    def _piece(self, token: int) -> str:
        if token not in self._pieces:
            self._pieces[token] = self._side_door("/detokenize", {"tokens": [token]})["content"]
        return self._pieces[token]

    def _hidden(self, ids: list[int]) -> np.ndarray:
        reply = self._side_door("/embedding", {"content": ids})
        return np.asarray(reply[0]["embedding"], dtype=np.float32)

    def _logprobs(
        self, hidden: np.ndarray, following: list[int], k: int
    ) -> list[tuple[float, list[tuple[int, float]]]]:
        """For each row of hidden states: the log-probability of the token following it, and the top `k`."""
        assert self._output is not None
        out: list[tuple[float, list[tuple[int, float]]]] = []
        for start in range(0, len(following), _ROWS):
            logits = hidden[start : start + _ROWS] @ self._output.T
            logits *= self._scale
            if self._softcap:
                logits = self._softcap * np.tanh(logits / self._softcap)
            peak = logits.max(axis=1, keepdims=True)
            logprobs = logits - (peak + np.log(np.exp(logits - peak).sum(axis=1, keepdims=True)))
            for row, values in enumerate(logprobs):
                actual = following[start + row]
                best = np.argpartition(values, -k)[-k:] if k else np.empty(0, dtype=np.int64)
                best = best[np.argsort(values[best])[::-1]]
                out.append((float(values[actual]), [(int(t), float(values[t])) for t in best]))
        return out


def _scored(
    ids: list[int],
    pieces: dict[int, str],
    prompt: str | list[int],
    logprobs: list[tuple[float, list[tuple[int, float]]]],
) -> list[ScoredToken]:
    text = prompt if isinstance(prompt, str) else "".join(pieces[i] for i in ids)
    tokens: list[ScoredToken] = []
    offset = 0
    for i, token in enumerate(ids):
        piece = pieces[token]
        # A token the tokenizer added (a BOS) has no text in the prompt: it takes none of the offsets.
        shown = "" if i == 0 and not text.startswith(piece) else piece
        if i == 0:
            tokens.append(ScoredToken(shown, offset, None, None))
        else:
            logprob, best = logprobs[i - 1]
            top = {pieces[t]: value for t, value in best}
            top.setdefault(shown, logprob)
            tokens.append(ScoredToken(shown, offset, logprob, top))
        offset += len(shown)
    return tokens


def _field(reader: Any, name: str) -> Any:
    field = reader.fields.get(name)
    if field is None:
        return None
    value = field.parts[field.data[0]]
    return bytes(value).decode() if field.types and field.types[0].name == "STRING" else value[0]


def _text(piece: Any) -> str:
    """A piece as text; llama.cpp gives bytes that are not whole UTF-8 characters as a list of ints."""
    return piece if isinstance(piece, str) else bytes(piece).decode("utf-8", errors="replace")
