"""The body of `POST /generate`: vLLM's original demo server's request (a prompt or messages, and the
sampling parameters with vLLM's defaults). A field it does not know is refused, as vLLM's SamplingParams
refuses one."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from modelport.protocol.requests import INT32, ChatMessage


class VllmGenerateRequest(BaseModel):
    """`POST /generate`."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: str | None = Field(default=None, min_length=1)
    prompt: str | None = None
    messages: list[ChatMessage] | None = Field(default=None, min_length=1)
    stream: bool = False
    max_tokens: int = Field(default=16, ge=1, le=INT32)
    n: int = Field(default=1, ge=1, le=128)
    best_of: int | None = Field(default=None, ge=1, le=20)
    presence_penalty: float = Field(default=0.0, ge=-2, le=2)
    frequency_penalty: float = Field(default=0.0, ge=-2, le=2)
    repetition_penalty: float = Field(default=1.0, gt=0, le=10)
    temperature: float = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int = Field(default=-1, ge=-1, le=INT32)
    min_p: float = Field(default=0.0, ge=0, le=1)
    seed: int | None = Field(default=None, ge=-(2**63), lt=2**64)
    stop: str | list[str] | None = None
    ignore_eos: bool = False
    use_beam_search: bool = False
    length_penalty: float = 1.0
    early_stopping: bool = False
