"""The Messages API's request, as Anthropic's reference defines it: content blocks of the kinds a local
model can read (text, images, documents, search results, tool use and results, thinking), tools, tool
choice, thinking and output configuration. Fields it does not use (`cache_control`, `service_tier`, …) are
accepted and ignored, as a server without those features must."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

INT32 = 2**31 - 1


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")  # `cache_control`, `citations`, …: nothing a local model reads


class Base64Source(_Part):
    type: Literal["base64"]
    media_type: str
    data: str


class UrlSource(_Part):
    type: Literal["url"]
    url: str


class PlainTextSource(_Part):
    type: Literal["text"]
    media_type: str = "text/plain"
    data: str


class TextIn(_Part):
    type: Literal["text"]
    text: str


class ImageIn(_Part):
    type: Literal["image"]
    source: Annotated[Base64Source | UrlSource, Field(discriminator="type")]


class ContentSource(_Part):
    """A document given as content blocks (its text)."""

    type: Literal["content"]
    content: str | list[TextIn]


class DocumentIn(_Part):
    type: Literal["document"]
    source: Annotated[Base64Source | UrlSource | PlainTextSource | ContentSource, Field(discriminator="type")]
    title: str | None = None


class SearchResultIn(_Part):
    """A search result a client's retrieval found (`source` its URL or name), with its text."""

    type: Literal["search_result"]
    source: str
    title: str
    content: list[TextIn]


class ToolUseIn(_Part):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultIn(_Part):
    type: Literal["tool_result"]
    tool_use_id: str
    content: (
        str | list[Annotated[TextIn | ImageIn | DocumentIn | SearchResultIn, Field(discriminator="type")]]
    ) = ""
    is_error: bool = False


class ThinkingIn(_Part):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingIn(_Part):
    type: Literal["redacted_thinking"]
    data: str


Block = Annotated[
    TextIn
    | ImageIn
    | DocumentIn
    | SearchResultIn
    | ToolUseIn
    | ToolResultIn
    | ThinkingIn
    | RedactedThinkingIn,
    Field(discriminator="type"),
]
# The block types a message may hold, as `Block` lists them.
BLOCKS = tuple(get_args(kind.model_fields["type"].annotation)[0] for kind in get_args(get_args(Block)[0]))


class MessageIn(BaseModel):
    role: Literal["user", "assistant"]
    content: str | list[Block]

    @field_validator("content", mode="before")
    @classmethod
    def _known_blocks(cls, value: Any) -> Any:
        # Said by name: pydantic's own words for a block of another type, as one side of `str | list`, are
        # "Input should be a valid string". Anthropic's server tools' blocks (`server_tool_use`,
        # `web_search_tool_result`, …) come from tools that run on Anthropic's side, none here.
        for j, block in enumerate(value if isinstance(value, list) else []):
            kind = block.get("type") if isinstance(block, dict) else None
            if isinstance(kind, str) and kind not in BLOCKS:
                raise ValueError(
                    f"content[{j}] is a `{kind}` block, which no model here reads; a message holds "
                    f"{', '.join(BLOCKS)} blocks"
                )
        return value


class ToolIn(_Part):
    """A client tool: a name, a description and the JSON schema of its input; or one of Anthropic's own
    (`bash_…`, `text_editor_…`, `memory_…`), given by its dated `type` and fixed name alone
    (`defined_tools`)."""

    name: str | None = Field(default=None, min_length=1, max_length=128)
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    type: str | None = None


class ToolChoice(BaseModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class ThinkingConfig(BaseModel):
    """`enabled` with a budget of thinking tokens, `disabled`, or `adaptive` (the model decides)."""

    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = Field(default=None, ge=1, le=INT32)


class JsonFormat(BaseModel):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(_Part):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JsonFormat | None = None


class Metadata(_Part):
    user_id: str | None = None


class MessagesRequest(_Part):
    """`POST /v1/messages`; also `POST /v1/messages/count_tokens`, where `max_tokens` is not asked for."""

    model: str = Field(min_length=1)
    messages: list[MessageIn] = Field(min_length=1)
    max_tokens: int = Field(ge=1, le=INT32)
    system: str | list[TextIn] | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0, le=INT32)
    metadata: Metadata | None = None
    tools: list[ToolIn] | None = None
    tool_choice: ToolChoice | None = None
    thinking: ThinkingConfig | None = None
    output_config: OutputConfig | None = None


class CountTokensRequest(MessagesRequest):
    """`POST /v1/messages/count_tokens`: a Messages request without `max_tokens`."""

    max_tokens: int = Field(default=1, ge=1, le=INT32)
