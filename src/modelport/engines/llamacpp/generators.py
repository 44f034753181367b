"""The chat and completion predictors of a GGUF model, as objects whose abilities the contract reads: the
chat predictor knows its template (`ChatTemplate`: the prompt it renders, where its turns end, the tool
format it shows) and its model's format (`ChatFormatted`: thinking markers, call syntax), the completion
predictor scores prompts (`PromptScorer`) and reads the model's token ids (`Vocabulary`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from modelport.engines.llamacpp import conversation_cache, conversation_names, template_probe
from modelport.engines.llamacpp.chunk_stream import stream_chunks
from modelport.engines.llamacpp.conversation_cache import ConversationCache
from modelport.engines.llamacpp.instances import Instances
from modelport.engines.llamacpp.launch import SideDoor
from modelport.engines.llamacpp.scoring import Scorer
from modelport.errors import InvalidRequestError
from modelport.predictors.abilities import ScoredToken
from modelport.predictors.chat_format import PLAIN, ChatFormat
from modelport.predictors.family_marks import HARMONY
from modelport.predictors.parameter import Parameter

SCORING_CTX = 4096  # the longest prompt `echo` + `logprobs` scores (one pass: memory grows with its square)


class LlamaChat:
    """Chat with the GGUF's own template (or the one its options name), as llama.cpp renders it."""

    def __init__(
        self,
        instances: Instances,
        door: SideDoor,
        vocab_size: int,
        form: ChatFormat = PLAIN,
        media: tuple[str, ...] = (),
        kept: ConversationCache | None = None,
        pace: float = 0.0,
    ) -> None:
        self._instances = instances
        self._door = door
        self._conversations = kept
        self._pace = pace  # seconds between a stream's hand-overs while tokens come faster (`bunch`)
        self.media = media  # what its projector lets it read beside text: ("image",)
        props = door.get("/props")
        self._vocab_size = vocab_size  # `logit_bias` ids are checked against it
        self.tool_format = form.calls  # read from the template llama.cpp renders with, before it loaded
        self._traits = template_probe.probe(self._rendered)
        # A template that writes this much before the messages: every conversation shares it.
        self._preambled = self._traits.preamble >= conversation_names.PROMPT_PIECE
        self.chat_format = template_probe.opened(form, self._rendered)
        if form.markers:
            tokens = tuple((marker, self._tokens(marker)) for marker in form.markers)
            self.chat_format = dataclasses.replace(self.chat_format, tokens=tokens)
        if form.harmony:  # a harmony answer goes on past `<|end|>` (the analysis ends there) to its final
            self.stops = [HARMONY["return"], HARMONY["call"]]
        else:
            self.stops = [self._traits.turn_end] if self._traits.turn_end else []
        eos = str(props.get("eos_token") or "")
        if form.special and eos and eos not in self.stops:  # special tokens are written as text, this one too
            self.stops.append(eos)
        # Where a grammar holds the answer, it says where the answer ends: a turn's end after which the format
        # goes on with another message (Solar Open's thinking ends where its answer's message begins) is no
        # stop then.
        self._held_stops = [stop for stop in self.stops if stop.strip() != form.goes_on]
        self._timed = form.foreign_thinking  # llama.cpp reads it, and may refuse: the usage so far is kept

    def __call__(
        self,
        messages: list[dict[str, Any]],
        options: Annotated[dict[str, Any] | None, Parameter.GenerationOptions] = None,
        tools: Annotated[list[dict[str, Any]] | None, Parameter.ChatTools] = None,
    ) -> Iterator[dict[str, Any]]:
        request = {**_llama_options(options, self._vocab_size), "messages": self._traits.adapt(messages)}
        kept_for_later = request.pop("prompt_cache_key", None) is not None
        if self._timed:
            request["timings_per_token"] = True
        stops = self._held_stops if "grammar" in request else self.stops
        if stops:  # however the vocabulary spells it, the turn's end ends the answer
            stop = request.get("stop") or []
            request["stop"] = [*([stop] if isinstance(stop, str) else stop), *stops]
        if tools:
            # As a template variable rather than llama.cpp's `tools`, which refuses a grammar beside it:
            # modelport constrains the native call format itself.
            request["chat_template_kwargs"] = {**request.get("chat_template_kwargs", {}), "tools": tools}
        kept = self._conversations
        if kept is None or not self._instances.main(request):
            return stream_chunks(self._instances.chat(request), request, pace=self._pace)
        if _has_media(request["messages"]):
            turn = kept.leave(request)
            return stream_chunks(self._instances.chat(request), request, turn.ended, self._pace)
        # A one-off question, a RAG answer, a code edit; unless the caller means to go on from it, or what
        # comes before its message is long (the tools' description, the template's own text): the next
        # conversation reuses that (`message_names`).
        lone = len(request["messages"]) == 1 and not kept_for_later and not tools and not self._preambled
        lone = lone and len(json.dumps(request["messages"][0])) < conversation_cache.LONE_KEPT_CHARS
        turn = kept.place(request, conversation_names.message_names(request, self._preambled), lone)
        return stream_chunks(self._instances.chat(request), request, turn.ended, self._pace)

    def render(self, messages: list[dict[str, Any]]) -> str:
        """The prompt the template makes of `messages` (as adapted for it)."""
        rendered = self._rendered(self._traits.adapt(messages))
        if rendered is None:
            raise InvalidRequestError(
                "The model's chat template refused the conversation.", param="messages", code="template_error"
            )
        return rendered

    def _tokens(self, text: str) -> tuple[int, ...]:
        """`text` as the vocabulary's token ids (special tokens among them)."""
        reply = self._door.post("/tokenize", {"content": text, "add_special": False, "parse_special": True})
        reply.raise_for_status()
        return tuple(int(token) for token in reply.json()["tokens"])

    def _rendered(self, messages: list[dict[str, Any]]) -> str | None:
        reply = self._door.post("/apply-template", {"messages": messages})
        # A template's own refusal (`raise_exception`): a 400, or a 500 where llama.cpp renders the template
        # straight (a raw chat) and reports the exception as its own failure.
        if reply.status_code == 400 or (reply.status_code == 500 and "Jinja Exception" in reply.text):
            return None
        reply.raise_for_status()
        return str(reply.json()["prompt"])


class LlamaCompletion:
    """Completions of a prompt given as text or as the model's own token ids; `suffix` through the model's
    fill-in-the-middle tokens. Scoring starts a second llama.cpp instance on its first use."""

    def __init__(
        self,
        instances: Instances,
        door: SideDoor,
        vocab_size: int,
        gguf: Path,
        kept: ConversationCache | None = None,
        pace: float = 0.0,
    ) -> None:
        self._instances = instances
        self._door = door
        self._conversations = kept
        self._pace = pace  # seconds between a stream's hand-overs while tokens come faster (`bunch`)
        self._fim = _fill_in_the_middle_tokens(door)
        self.fills_in_the_middle = self._fim is not None
        self.vocab_size = vocab_size
        self._scorer = Scorer(gguf, SCORING_CTX)

    def __call__(
        self,
        prompt: str | list[int],
        options: Annotated[dict[str, Any] | None, Parameter.GenerationOptions] = None,
    ) -> Iterator[dict[str, Any]]:
        options = _llama_options(options, self.vocab_size)
        suffix = options.pop("suffix", None)
        if suffix is not None:
            if not isinstance(prompt, str):
                raise InvalidRequestError("suffix needs a text prompt, not token ids.", param="suffix")
            if self._fim is None:
                raise InvalidRequestError(
                    "This model has no fill-in-the-middle tokens, so it cannot complete before a suffix.",
                    param="suffix",
                )
            prompt = f"{self._fim[0]}{prompt}{self._fim[1]}{suffix}{self._fim[2]}"
        request = {**options, "prompt": prompt}
        kept = self._conversations
        if kept is None or not self._instances.main(request):
            return stream_chunks(self._instances.completion(request), request, pace=self._pace)
        # A prompt shorter than a piece is found by the same prompt again only.
        lone = len(prompt) < conversation_names.PROMPT_PIECE
        turn = kept.place(request, conversation_names.prompt_names(request), lone)
        return stream_chunks(self._instances.completion(request), request, turn.ended, self._pace)

    def detokenize(self, ids: list[int]) -> str:
        """The text of token ids (for `echo` of a prompt given as ids)."""
        reply = self._door.post("/detokenize", {"tokens": ids})
        reply.raise_for_status()
        return str(reply.json()["content"])

    def score(self, prompt: str | list[int], k: int) -> list[ScoredToken]:
        """Each prompt token's log-probability (for `echo` with `logprobs`)."""
        return self._scorer.score(prompt, k)

    def score_all(self, prompts: list[str | list[int]], k: int) -> list[list[ScoredToken]]:
        """`score` of each prompt, their log-probabilities computed together."""
        return self._scorer.score_all(prompts, k)


def _has_media(messages: list[dict[str, Any]]) -> bool:
    return any(
        isinstance(part, dict) and part.get("type") not in (None, "text")
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )


def vocabulary_size(door: SideDoor) -> int:
    """How many token ids the loaded model's vocabulary has."""
    return int(door.get("/v1/models")["data"][0]["meta"]["n_vocab"])


def _llama_options(options: dict[str, Any] | None, vocab_size: int) -> dict[str, Any]:
    """OpenAI's and vLLM's names and forms for llama.cpp's options."""
    options = dict(options or {})
    if isinstance(options.get("logit_bias"), dict):
        options["logit_bias"] = _bias_pairs(options["logit_bias"], vocab_size)
    if "repetition_penalty" in options:
        options["repeat_penalty"] = options.pop("repetition_penalty")
    if options.get("seed") is not None:
        # Reusing part of a shared KV cache changes how the prompt is batched, hence the last bits of the
        # logits: a seeded request processes its whole prompt, so the same seed gives the same text.
        options.setdefault("cache_prompt", False)
    return options


def _bias_pairs(bias: dict[str, float], vocab_size: int) -> list[list[float]]:
    """`logit_bias` as llama.cpp's `[token, bias]` pairs: llama.cpp reads a JSON object into a map that
    looks up every key it adds among those before it, so an object of 100,000 ids took 12 s of the request's
    thread before its first token (an array, a few milliseconds). An id outside the vocabulary is a 400, as
    OpenAI's (llama.cpp would pass over it)."""
    pairs: list[list[float]] = []
    for key, value in bias.items():
        token = int(key)
        if token >= vocab_size:
            raise InvalidRequestError(
                f"Invalid key in 'logit_bias': {key}. Maximum value is {vocab_size - 1}.", param="logit_bias"
            )
        pairs.append([token, value])
    return pairs


def _fill_in_the_middle_tokens(door: SideDoor) -> tuple[str, str, str] | None:
    """The model's prefix, suffix and middle tokens, if its vocabulary has one of the common sets.
    Counted by tokenizing, not by completing: a completion would leave its tokens in a slot, which nothing
    empties with the conversation cache on, and the first greedy answers after a start then differed from
    those of a server whose slots were empty (llama-server's, or modelport's without the cache)."""

    def tokens(text: str) -> int:
        reply = door.post("/tokenize", {"content": text})
        reply.raise_for_status()
        return len(reply.json()["tokens"])

    for names in (
        ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
        ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ):
        if tokens(names[0]) == 1:
            return names
    return None
