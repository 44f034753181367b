"""Annotations that tell modelport which OpenAI argument a predictor parameter receives.

The names and denotations mirror Muna's predictor annotations, so a predictor written for Muna ports by
changing its import. Use them as `typing.Annotated` metadata, called or bare:
`Annotated[np.ndarray, Parameter.Embedding]` or `Annotated[float, Parameter.AudioSpeed(min=0.25, max=4)]`.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelport.predictors.family_marks import CALL_SYNTAXES

# The native tool-call formats modelport can constrain and parse (`Parameter.ChatTools(format=...)`).
TOOL_FORMATS = CALL_SYNTAXES


@dataclass(frozen=True)
class Parameter:
    """What one predictor parameter (or return value) means in OpenAI's API."""

    denotation: str
    description: str | None = None
    sample_rate: int | None = None
    min: float | None = None
    max: float | None = None
    tool_format: str | None = None

    # Embeddings
    @classmethod
    def Embedding(cls, *, description: str | None = None) -> Parameter:
        """An embedding matrix: float32 numpy array, shape (N, D), one row per input text."""
        return cls("embedding", description)

    @classmethod
    def EmbeddingDims(
        cls, *, description: str | None = None, min: int | None = None, max: int | None = None
    ) -> Parameter:
        """The `dimensions` argument of embeddings (Matryoshka truncation)."""
        return cls("openai.embeddings.dims", description, min=min, max=max)

    # Audio
    @classmethod
    def Audio(cls, *, sample_rate: int | None = None, description: str | None = None) -> Parameter:
        """Linear PCM audio, float32 numpy array, (F,) mono or (F, C) interleaved, at `sample_rate` Hz (a
        speech predictor object that declares its `sample_rate` may leave it out)."""
        return cls("audio", description, sample_rate=sample_rate)

    @classmethod
    def AudioVoice(cls, *, description: str | None = None) -> Parameter:
        """The `voice` of speech; annotate a `Literal[...]` or `StrEnum` whose values are the voices."""
        return cls("openai.audio.speech.voice", description)

    @classmethod
    def AudioSpeed(
        cls, *, description: str | None = None, min: float | None = None, max: float | None = None
    ) -> Parameter:
        """The `speed` of speech, 1.0 being the voice's natural pace."""
        return cls("openai.audio.speech.speed", description, min=min, max=max)

    @classmethod
    def TranscriptionLanguage(cls, *, description: str | None = None) -> Parameter:
        """The `language` of a transcription request (ISO-639-1), or None."""
        return cls("openai.audio.transcriptions.language", description)

    @classmethod
    def TranscriptionPrompt(cls, *, description: str | None = None) -> Parameter:
        """The `prompt` of a transcription request, or None."""
        return cls("openai.audio.transcriptions.prompt", description)

    @classmethod
    def TimestampGranularities(cls, *, description: str | None = None) -> Parameter:
        """`timestamp_granularities` of a transcription (`["segment"]`, `["word"]`, both), or None.

        Not part of Muna's contract.
        """
        return cls("openai.audio.transcriptions.timestamp_granularities", description)

    # Chat and completions
    @classmethod
    def Temperature(
        cls, *, description: str | None = None, min: float | None = None, max: float | None = None
    ) -> Parameter:
        """Sampling `temperature` (chat, completions and transcriptions)."""
        return cls("openai.chat.completions.temperature", description, min=min, max=max)

    @classmethod
    def TopP(
        cls, *, description: str | None = None, min: float | None = None, max: float | None = None
    ) -> Parameter:
        """Nucleus sampling `top_p`."""
        return cls("openai.chat.completions.top_p", description, min=min, max=max)

    @classmethod
    def MaxOutputTokens(
        cls, *, description: str | None = None, min: int | None = None, max: int | None = None
    ) -> Parameter:
        """`max_completion_tokens`, or the older `max_tokens`."""
        return cls("openai.chat.completions.max_output_tokens", description, min=min, max=max)

    @classmethod
    def PresencePenalty(
        cls, *, description: str | None = None, min: float | None = None, max: float | None = None
    ) -> Parameter:
        """`presence_penalty`."""
        return cls("openai.chat.completions.presence_penalty", description, min=min, max=max)

    @classmethod
    def FrequencyPenalty(
        cls, *, description: str | None = None, min: float | None = None, max: float | None = None
    ) -> Parameter:
        """`frequency_penalty`."""
        return cls("openai.chat.completions.frequency_penalty", description, min=min, max=max)

    @classmethod
    def ResponseFormat(cls, *, description: str | None = None) -> Parameter:
        """`response_format`, as the dict the caller sent."""
        return cls("openai.chat.completions.response_format", description)

    @classmethod
    def ChatTools(cls, *, description: str | None = None, format: str | None = None) -> Parameter:
        """`tools`, as the list of OpenAI function-tool dicts the caller sent.

        Without `format` the predictor handles tool calling itself and answers with `tool_calls` (unless it
        is a `ChatTemplate` object, which names its template's format itself). With a `format` (`"hermes"`,
        `"llama3"`, `"mistral"`: see `modelport.service.generation.tool_formats`) it only shows the tools to
        its model, whose chat template renders them; modelport then constrains the output to that native
        call format and parses it. Not part of Muna's contract.
        """
        return cls("openai.chat.completions.tools", description, tool_format=format)

    @classmethod
    def GenerationOptions(cls, *, description: str | None = None) -> Parameter:
        """Every other generation argument the caller sent, as a dict (for engines that honour them all).

        Receives what no other annotated parameter of the predictor took: `stop`, `seed`, `n`, `logprobs`,
        `tool_choice`, vLLM-style extras from `extra_body`, and so on. Not part of Muna's contract.
        """
        return cls("modelport.generation_options", description)
