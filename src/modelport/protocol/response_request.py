"""Request bodies of the Responses API (`/v1/responses`), validated once at the edge."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from openai.types.responses import ResponseFormatTextConfig
from openai.types.responses import Tool as SDKTool
from openai.types.responses.response import ToolChoice as SDKToolChoice
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from modelport.protocol.requests import INT32, Metadata, OpenAIRequest, ReasoningEffort
from modelport.protocol.tagged_unions import tagged
from modelport.protocol.validation import invalid, telling

Summary = Literal["auto", "concise", "detailed"]


if TYPE_CHECKING:
    ToolChoice = SDKToolChoice
    RequestTool = SDKTool
    TextFormat = ResponseFormatTextConfig
else:
    ToolChoice = tagged(SDKToolChoice, "a tool choice other than none, auto or required")
    RequestTool = tagged(SDKTool, "a tool")
    TextFormat = tagged(ResponseFormatTextConfig, "a text format")


class ReasoningOptions(BaseModel):
    """`reasoning`, as OpenAI defines it. Accepted and echoed on every model, as Chat Completions'
    `reasoning_effort` is: a model that thinks is steered by the effort and its thinking summarised as
    asked; on one that does not, they change nothing (clients such as the OpenAI Agents SDK send them by
    default). A field OpenAI adds later is kept as sent, and echoed."""

    model_config = ConfigDict(extra="allow")

    effort: ReasoningEffort | None = None
    summary: Summary | None = None
    generate_summary: Summary | None = None  # the older name of `summary`
    context: Literal["auto", "current_turn", "all_turns"] | None = None

    def summary_asked(self) -> Summary | None:
        """The summary asked for, by either name."""
        return self.summary or self.generate_summary


class TextOptions(BaseModel):
    """`text`: the answer's format (plain text, a JSON object, or one a JSON schema holds) and its verbosity
    (a hint that changes nothing on these models, accepted as `reasoning` is)."""

    model_config = ConfigDict(extra="allow")

    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


ConversationId = Annotated[str, Field(min_length=1)]

_TOOL: TypeAdapter[RequestTool] = TypeAdapter(RequestTool)


def tool_of(given: Any, where: str) -> RequestTool:
    """A tool given elsewhere than in `tools` (an input item's), checked as `tools` are; a 400 names the
    part at fault within `where`."""
    try:
        return _TOOL.validate_python(given)
    except ValidationError as error:
        raise invalid(telling(error.errors()), within=where) from None


class ConversationRef(BaseModel):
    """`conversation` given as `{"id": …}` rather than the id alone."""

    id: str = Field(min_length=1)


class ContextManagement(BaseModel):
    """One entry of `context_management`: server-side compaction, the only strategy OpenAI defines.
    `compact_threshold` is the rendered input's tokens at which a turn compacts its context first; without
    it, a turn compacts only when its context does not fit the model."""

    type: Literal["compaction"]
    compact_threshold: int | None = Field(default=None, ge=1, le=INT32)


class ResponseRequest(OpenAIRequest):
    """`POST /v1/responses`. Fields beyond OpenAI's (vLLM's `top_k`, a `seed`) reach the model as they do
    on chat completions."""

    input: str | list[dict[str, Any]]
    instructions: str | None = None
    previous_response_id: str | None = None
    store: bool | None = None  # OpenAI's default is true (when this server stores at all)
    metadata: Metadata = None
    max_output_tokens: int | None = Field(default=None, ge=16, le=INT32)  # OpenAI's bounds
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)  # the OpenResponses specification's
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    tools: list[RequestTool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: int | None = Field(default=None, ge=1, le=INT32)
    text: TextOptions | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None
    stream: bool = False
    background: bool = False
    reasoning: ReasoningOptions | None = None
    include: list[str] | None = None
    conversation: ConversationId | ConversationRef | None = Field(default=None, union_mode="left_to_right")
    prompt: dict[str, Any] | None = None
    service_tier: str | None = None
    stream_options: dict[str, Any] | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    context_management: list[ContextManagement] | None = Field(default=None, max_length=1)

    def compaction(self) -> ContextManagement | None:
        """The server-side compaction asked for, if any."""
        return self.context_management[0] if self.context_management else None


class InputTokensRequest(OpenAIRequest):
    """`POST /v1/responses/input_tokens`: what a `POST /v1/responses` would send, to count its input tokens
    (`model` may be left out: the default chat model's count)."""

    model: str | None = None  # type: ignore[assignment]
    input: str | list[dict[str, Any]] = Field(default_factory=list)
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation: ConversationId | ConversationRef | None = Field(default=None, union_mode="left_to_right")
    tools: list[RequestTool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    text: TextOptions | None = None
    reasoning: ReasoningOptions | None = None
    truncation: Literal["auto", "disabled"] | None = None


class CompactRequest(OpenAIRequest):
    """`POST /v1/responses/compact`: a conversation (its items, or the responses before
    `previous_response_id`) to shrink into its user messages and one compaction item."""

    input: str | list[dict[str, Any]] = Field(default_factory=list)
    instructions: str | None = None
    previous_response_id: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=16, le=INT32)


def conversation_id(given: str | ConversationRef | None) -> str | None:
    """`conversation` as the id it names, whichever way it was given."""
    return given.id if isinstance(given, ConversationRef) else given
