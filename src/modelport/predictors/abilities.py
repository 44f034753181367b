"""What a predictor may do beyond its call, declared by the object it is: a predictor given as an object
whose class has these members (and a typed `__call__`) has the ability, and the contract records it on the
checked `Predictor` when it is registered. A plain function has none of them.

- `ChatTemplate`: a chat predictor that can show the prompt its template makes of messages (`/generate`
  with messages), the text that ends its turns, and which native tool-call format it renders, if any.
- `ChatFormatted`: a chat predictor whose model writes a format of its own (`chat_format`: its thinking
  markers and call syntax), which modelport constrains and reads.
- `PromptScorer`: a completion predictor that gives every prompt token's log-probability (`echo` with
  `logprobs`); `PromptsScorer`, one that scores a request's prompts together where that costs less than one
  at a time (eval harnesses send several a request).
- `Vocabulary`: a completion predictor that takes its model's own token ids and can read them back.
- `FillsInTheMiddle`: a completion predictor that says whether it completes before a `suffix` (its model
  has fill-in-the-middle tokens).
- `TokenCounter`: an embedding predictor that counts the tokens of its inputs (`usage`).
- `TokenSpans`: an embedding predictor that shows where its tokens fall in a text and how many it reads,
  so vector stores cut files into chunks it reads whole.
- `Voices`: a speech predictor whose voices and sample rate are known only once it is loaded (a voice
  file's), instead of in its annotations.

And what the stream a predictor returns may do:
- `Bunching`: hand its items over in bunches, to a reader that needs only the whole answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from modelport.predictors.chat_format import ChatFormat


@runtime_checkable
class ChatTemplate(Protocol):
    """The chat template a chat predictor renders with."""

    # The native tool-call format its template shows tools in (`hermes`, `llama3`, `mistral`), or None when
    # the template shows no tools: then modelport describes them in the prompt and the predictor never
    # receives `tools`.
    tool_format: str | None
    stops: list[str]  # what ends an assistant turn, as text

    def render(self, messages: list[dict[str, Any]]) -> str:
        """The prompt the template makes of `messages`."""
        ...


@runtime_checkable
class ChatFormatted(Protocol):
    """A chat predictor whose model writes a format of its own: how it marks its thinking, how it writes
    its calls (the answer it streams is the model's raw text, which modelport reads by this format)."""

    chat_format: ChatFormat


@dataclass(frozen=True)
class ScoredToken:
    """One prompt token: its text, where that text starts in the prompt, its log-probability given the
    tokens before it (None for the first), and the `k` most likely tokens at its place plus itself."""

    text: str
    offset: int
    logprob: float | None
    top: dict[str, float] | None


@runtime_checkable
class PromptScorer(Protocol):
    """Scores prompts: each token's log-probability given the tokens before it."""

    def score(self, prompt: str | list[int], k: int) -> list[ScoredToken]:
        """Every token of `prompt` (text, or the model's token ids) with the `k` most likely at its place."""
        ...


@runtime_checkable
class PromptsScorer(Protocol):
    """Scores several prompts in one call (a `PromptScorer` too; asked instead of it for more than one)."""

    def score_all(self, prompts: list[str | list[int]], k: int) -> list[list[ScoredToken]]:
        """`score` of each prompt, in order."""
        ...


@runtime_checkable
class Vocabulary(Protocol):
    """The model's own token ids: how many there are, and their text."""

    vocab_size: int

    def detokenize(self, ids: list[int]) -> str:
        """The text of token ids."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens an embedding model reads."""

    def count_tokens(self, texts: list[str]) -> int:
        """Tokens in `texts`, together."""
        ...


@runtime_checkable
class FillsInTheMiddle(Protocol):
    """A completion predictor that says whether its model completes before a `suffix`."""

    fills_in_the_middle: bool


@runtime_checkable
class TokenSpans(Protocol):
    """Where an embedding model's tokens fall in a text, and how many tokens it reads at once."""

    max_tokens: int  # special tokens included

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) character offsets of each token of `text`, special tokens left out."""
        ...


@runtime_checkable
class Voices(Protocol):
    """A speech predictor's voices and sample rate, known once it is loaded."""

    voices: tuple[str, ...]
    sample_rate: int


@runtime_checkable
class Bunching(Protocol):
    """A predictor's stream that can hand its items over in bunches rather than one by one as they come."""

    def bunch(self, seconds: float) -> None:
        """Let an item wait up to `seconds` for those after it (the last one goes at once)."""
        ...
