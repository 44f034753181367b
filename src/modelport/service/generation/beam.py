"""Beam search over any predictor that reports top log-probabilities (`use_beam_search`, vLLM's extra).

Each step asks the model, for every live beam, for its `width` most likely next tokens (one-token
generations whose prompt is the beam so far: an assistant prefill for chat, the prompt plus the beam for
completions; the engine's prompt cache keeps those cheap), then keeps the `width` best continuations by
summed log-probability. Finished beams rank by that sum divided by length ** length_penalty. The cost is
`width` one-token calls per generated token, run side by side.
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
from dataclasses import dataclass
from typing import Any

from modelport.errors import InvalidRequestError
from modelport.predictors.contract import Predictor
from modelport.predictors.manager import LoadedModel
from modelport.service import calls

_OPTIONS = "modelport.generation_options"
_SPECIAL = re.compile(r"<\|?[\w.-]+\|?>")  # an end-of-turn or end-of-text token, as the engine spells it


@dataclass(frozen=True)
class Beam:
    """One hypothesis: its text, summed log-probability, and token count."""

    text: str = ""
    logprob: float = 0.0
    tokens: int = 0
    finish_reason: str | None = None

    def score(self, length_penalty: float) -> float:
        # logprob / length ** length_penalty, in the log domain: a huge penalty saturates instead of
        # overflowing a float.
        exponent = -length_penalty * math.log(max(self.tokens, 1))
        return self.logprob * math.exp(min(max(exponent, -700.0), 700.0))


async def search(
    model: LoadedModel,
    predictor: Predictor,
    primary: Any,
    chat: bool,
    width: int,
    n: int,
    max_tokens: int,
    length_penalty: float,
    early_stopping: bool,
    stop: list[str],
    options: dict[str, Any],
    turns: asyncio.Semaphore,
) -> tuple[list[Beam], int]:
    """The `n` best beams of `width`, and the prompt's token count; no more calls at once than `turns`
    lets the request make (its model's slots: more would wait in the model's line, and a request could fill
    that line by itself and be refused with a 429 on an idle server)."""
    if _OPTIONS not in options:
        raise InvalidRequestError(
            f"The model's predictor `{predictor.name}` cannot report log-probabilities for beam search.",
            param="use_beam_search",
        )
    if width < n:
        raise InvalidRequestError(
            "Beam search needs best_of (the beam width) of at least n.", param="best_of"
        )
    base = {
        k: v for k, v in options[_OPTIONS].items() if k not in ("seed", "stop", "logprobs", "top_logprobs")
    }
    step_options = {**base, "max_tokens": 1, "temperature": 0.0}
    step_options.update({"logprobs": True, "top_logprobs": width} if chat else {"logprobs": width})
    live, finished, prompt_tokens = [Beam()], [], 0
    for _ in range(max_tokens):
        steps = await asyncio.gather(
            *(
                _next_tokens(
                    model, predictor, primary, chat, beam, {**options, _OPTIONS: step_options}, turns
                )
                for beam in live
            )
        )
        candidates = []
        for beam, (tops, ended, prompt) in zip(live, steps, strict=True):
            prompt_tokens = prompt_tokens or prompt
            if not tops:  # the engine ended the answer without reporting the end token
                candidates.append(Beam(beam.text, beam.logprob, beam.tokens, "stop"))
            for rank, (token, logprob) in enumerate(tops):
                grown = Beam(beam.text + token, beam.logprob + logprob, beam.tokens + 1)
                if (rank == 0 and ended) or _SPECIAL.fullmatch(token.strip() or "-"):
                    grown = Beam(beam.text, grown.logprob, grown.tokens, "stop")
                cut = min((grown.text.find(s) for s in stop if s in grown.text), default=-1)
                if cut >= 0:
                    grown = Beam(grown.text[:cut], grown.logprob, grown.tokens, "stop")
                candidates.append(grown)
        candidates.sort(key=lambda b: -b.logprob)
        live = []
        for beam in candidates:
            if beam.finish_reason:
                finished.append(beam)
            elif len(live) < width:
                live.append(beam)
            if len(live) == width:
                break
        if not live or _done(finished, live, width, length_penalty, early_stopping):
            break
    finished.extend(Beam(b.text, b.logprob, b.tokens, "length") for b in live)
    finished.sort(key=lambda b: -b.score(length_penalty))
    return finished[:n], prompt_tokens


def _done(finished: list[Beam], live: list[Beam], width: int, length_penalty: float, early: bool) -> bool:
    if len(finished) < width:
        return False
    if early:
        return True
    # A live beam only loses log-probability as it grows: stop once none can beat the kept finished ones.
    kept = sorted((b.score(length_penalty) for b in finished), reverse=True)[:width]
    best_live = max(b.score(length_penalty) for b in live)
    return best_live < kept[-1] if length_penalty >= 0 else False


async def _next_tokens(
    model: LoadedModel,
    predictor: Predictor,
    primary: Any,
    chat: bool,
    beam: Beam,
    options: dict[str, Any],
    turns: asyncio.Semaphore,
) -> tuple[list[tuple[str, float]], bool, int]:
    """The most likely next tokens after `beam`, whether the greedy one ends the answer, and the prompt
    token count."""
    if chat:
        extended: Any = [*primary, {"role": "assistant", "content": beam.text}] if beam.text else primary
    else:
        extended = primary + beam.text
    tops: list[tuple[str, float]] = []
    ended, prompt_tokens = False, 0
    async with turns:
        stream = calls.iterate(model, predictor, functools.partial(predictor, extended, options))
        try:
            async for chunk in stream:
                data = chunk if isinstance(chunk, dict) else chunk.model_dump()
                usage = data.get("usage") or {}
                if usage and not beam.text:
                    prompt_tokens = int(usage.get("prompt_tokens", 0))
                for choice in data.get("choices") or []:
                    for token in (choice.get("logprobs") or {}).get("content") or []:
                        tops = tops or [
                            (t["token"], float(t["logprob"])) for t in token.get("top_logprobs") or []
                        ]
                    ended = ended or choice.get("finish_reason") == "stop"
        finally:
            await stream.aclose()
    return tops, ended, prompt_tokens
