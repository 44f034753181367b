"""Server and model configuration: defaults, a TOML file, and the command line all land here."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import platformdirs
from pydantic import BaseModel, ByteSize, ConfigDict, Field, ValidationError, model_validator

from modelport import config_errors
from modelport.machine import total_memory
from modelport.predictors.contract import Capability
from modelport.predictors.registry import QUEUE, TIMEOUT

DEFAULT_CHAT = "smollm2-135m-instruct"
DEFAULT_EMBEDDING = "all-minilm-l6-v2"
DEFAULT_SPEECH = "piper-en-us"
DEFAULT_TRANSCRIPTION = "whisper-tiny-en"
ESPEAK = "espeak-ng"
DEFAULT_REALTIME = "realtime"  # the default realtime pipeline: the models above, chained
REALTIME = "realtime"  # the engine name of a realtime pipeline in models.toml
WHISPER_MULTILINGUAL = "whisper-base"

LAZY_KEEP_ALIVE = 300.0  # seconds a model loaded on first use stays loaded when idle, as Ollama's default
KeepAlive = Annotated[float, Field(gt=0)] | Literal["forever"]

# OpenAI's model names, as rules over their families, so that code written for OpenAI runs unchanged against
# the defaults and a new version, a -mini/-nano/-luna variant or a dated snapshot needs no new entry: what a
# rule covers (for `modelport models`), its pattern, and the default it reaches. The first that matches wins.
OPENAI_FAMILIES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (covers, re.compile(pattern), target)
    for covers, pattern, target in (
        ("gpt-realtime*, gpt-4o(-mini)-realtime*", r"gpt-realtime.*|gpt-4o(-mini)?-realtime.*",
         DEFAULT_REALTIME),
        ("whisper-1, gpt-transcribe*, gpt-4o(-mini)-transcribe*", r"whisper-1|gpt-(4o-(mini-)?)?transcribe.*",
         DEFAULT_TRANSCRIPTION),
        ("tts-1*, gpt-*-tts*", r"tts-1(-hd)?(-.*)?|gpt-.*-tts(-.*)?", DEFAULT_SPEECH),
        ("text-embedding-*", r"text-embedding-.*", DEFAULT_EMBEDDING),
        ("gpt-* (gpt-audio*, gpt-4o-audio-preview*), o1*, o3*, o4*, chatgpt-*, codex-*, davinci-002, "
         "babbage-002",
         r"gpt-(?!image).+|o[1-9](-.*)?|chatgpt-.*|codex-.*|davinci-002|babbage-002", DEFAULT_CHAT),
        ("claude-* (Anthropic's, through the Messages API)", r"claude-.*", DEFAULT_CHAT),
    )
)  # fmt: skip


def openai_family(name: str) -> str | None:
    """The default model an OpenAI model name reaches by its family, if it is one of OpenAI's."""
    for _, pattern, target in OPENAI_FAMILIES:
        if pattern.fullmatch(name):
            return target
    return None


class Autoscaling(BaseModel):
    """Ray Serve's replica autoscaling for one model (`modelport serve --ray`)."""

    model_config = ConfigDict(extra="forbid")

    min: int = Field(default=1, ge=0)
    max: int = Field(default=1, ge=1)
    target_ongoing_requests: float = Field(default=2.0, gt=0)


class ModelConfig(BaseModel):
    """One model: a built-in engine with its options, or a `module:function` predictor."""

    model_config = ConfigDict(extra="allow")

    id: str | None = Field(default=None, min_length=1)  # optional only for a remote catalog (`discover`)
    engine: str | None = None
    predictor: str | None = None
    capability: Capability | None = None
    concurrency: int | None = Field(default=None, ge=1)
    queue: int = Field(default=QUEUE, ge=0, description="calls that may wait for a slot before a 429")
    timeout: float = Field(
        default=TIMEOUT, gt=0, description="seconds a call, or a stream's next item, may take"
    )
    keep_alive: KeepAlive | None = Field(
        default=None, description="seconds idle before the model is unloaded, or `forever`"
    )
    # On a Ray cluster (`modelport serve --ray`) only:
    replicas: int = Field(default=1, ge=1, description="Ray Serve replicas of the model")
    autoscaling: Autoscaling | None = Field(default=None, description="instead of a fixed `replicas`")
    num_cpus: float | None = Field(
        default=None,
        ge=0,
        description="CPUs each replica reserves (fractions allowed); default: what its engine uses (a "
        "llama.cpp model its n_threads, else 1; the other engines 0.2)",
    )
    num_gpus: float = Field(default=0.0, ge=0, description="GPUs each replica reserves (fractions allowed)")
    max_ongoing_requests: int | None = Field(
        default=None, ge=1, description="requests a replica takes at once (default: its slots)"
    )

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if (self.engine is None) == (self.predictor is None):
            raise ValueError(f"model `{self.id}`: give exactly one of `engine` or `predictor`")
        if self.predictor is not None and self.options:  # only an engine has options of its own
            name = next(iter(self.options))
            meant = config_errors.meant(name, ModelConfig.model_fields)
            raise ValueError(f"model `{self.id}`: `{name}` is not a setting of a model{meant}")
        if self.id is None and not (self.engine == "remote" and self.options.get("discover")):
            raise ValueError(f"a model with {self.engine or self.predictor!r} has no `id`")
        return self

    @property
    def options(self) -> dict[str, Any]:
        """The engine options: every key beyond the ones above."""
        return dict(self.model_extra or {})


def default_models() -> list[ModelConfig]:
    """The models that ship with modelport's dependencies: one per capability, eSpeak NG's 100+ voices, and
    a multilingual Whisper that also translates. The speech models come with the `piper` extra (GPL-3.0):
    without it installed, none is served by default."""
    speaks = all(importlib.util.find_spec(package) for package in ("piper", "espeakng_loader"))
    models = [
        ModelConfig(id=DEFAULT_CHAT, engine="llamacpp"),
        ModelConfig(id=DEFAULT_EMBEDDING, engine="onnx-embedding"),
    ]
    if speaks:
        models.append(ModelConfig(id=DEFAULT_SPEECH, engine="piper"))
    models.append(ModelConfig(id=DEFAULT_TRANSCRIPTION, engine="faster-whisper"))
    if speaks:
        models.append(ModelConfig(id=ESPEAK, engine="espeak-ng"))
        models.append(ModelConfig(id=DEFAULT_REALTIME, engine=REALTIME))
    models.append(
        ModelConfig.model_validate({"id": WHISPER_MULTILINGUAL, "engine": "faster-whisper", "model": "base"})
    )
    return models


class RealtimePipeline(BaseModel):
    """A realtime pipeline (`engine = "realtime"` in models.toml): the served models it chains — speech
    detection, transcription, chat, speech — and the session defaults it starts with."""

    model_config = ConfigDict(extra="forbid")

    id: str
    transcription: str = DEFAULT_TRANSCRIPTION
    chat: str = DEFAULT_CHAT
    speech: str = DEFAULT_SPEECH
    vad: Literal["silero"] = Field(default="silero", description="the speech detector (Silero VAD, ONNX)")
    voice: str = "alloy"
    max_output_tokens: int = Field(
        default=4096, ge=1, description="what `max_output_tokens: inf` means: OpenAI's most for its models"
    )
    instructions: str = (
        "You are a helpful, friendly voice assistant. Answer briefly, in plain spoken sentences."
    )


class Limits(BaseModel):
    """Bounds on what one request may ask for; each is answered with a 4xx naming the parameter."""

    model_config = ConfigDict(extra="forbid")

    body_bytes: int = Field(default=27 * 1024 * 1024, ge=1, description="a request body (413)")
    read_seconds: float = Field(
        default=30.0,
        gt=0,
        description="how long a request's head may take to arrive, and its body may pause (408)",
    )
    messages: int = Field(default=2048, ge=1, description="messages in a chat request")
    embedding_inputs: int = Field(default=2048, ge=1, description="texts in one embeddings call")
    input_chars: int = Field(default=200_000, ge=1, description="characters in one text, prompt or message")
    max_tokens: int | None = Field(
        default=None, ge=1, description="max_tokens a request may ask for, and the default when it asks none"
    )
    # A small model can repeat itself to the end of its context (thousands of tokens, minutes on a CPU) when
    # nothing bounds it; clients that set no bound give up first.
    max_output_tokens: int | None = Field(
        default=4096,
        ge=1,
        description="the longest answer of a request that sets no bound (it may ask for more, up to the "
        "model's context); none: up to the context",
    )
    n: int = Field(default=16, ge=1, description="choices (`n`, `best_of`) in one request")
    audio_seconds: float = Field(default=3600.0, gt=0, description="length of audio to transcribe")
    fetch_bytes: int = Field(default=10 * 1024 * 1024, ge=1, description="one file fetched from a URL")
    fetch_request_bytes: int = Field(
        default=32 * 1024 * 1024, ge=1, description="every file one request brings in (URLs, ids, inline)"
    )
    fetch_items: int = Field(default=16, ge=1, description="files one request brings in")
    fetch_seconds: float = Field(default=10.0, gt=0, description="fetching one URL, redirects included")
    mcp_seconds: float = Field(
        default=30.0, gt=0, description="one operation on a remote MCP server: listing its tools, or a call"
    )
    mcp_output_chars: int = Field(default=100_000, ge=1, description="what one MCP tool call gives the model")
    document_pages: int = Field(default=2000, ge=1, description="pages of one PDF read for its text")
    document_chars: int = Field(
        default=5_000_000,
        ge=1,
        description="characters of text one document (file input or vector store file) may hold",
    )
    document_seconds: float = Field(
        default=30.0, gt=0, description="reading one document's text (a worker process, stopped past it)"
    )
    document_memory_mb: int = Field(
        default=1024, ge=64, description="memory of a worker process reading documents (MiB)"
    )
    document_workers: int = Field(default=2, ge=1, description="worker processes reading documents at once")
    realtime_message_bytes: int = Field(
        default=15 * 1024 * 1024, ge=1, description="one message a Realtime API client sends"
    )
    realtime_buffer_seconds: float = Field(
        default=600.0, gt=0, description="audio a realtime session holds uncommitted, or in one item"
    )
    realtime_items: int = Field(default=4096, ge=1, description="items one realtime conversation may hold")
    conversation_items: int = Field(
        default=10_000,
        ge=1,
        description="items one stored conversation may hold: past it, adding items is a 400 and the "
        "conversation takes no more turns (each turn reads every item)",
    )
    realtime_conversation_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="what one realtime conversation's items may hold, in bytes",
    )
    realtime_minutes: float = Field(default=60.0, gt=0, description="how long one realtime session may last")
    responses_socket_minutes: float = Field(
        default=60.0,
        gt=0,
        description="how long one Responses WebSocket connection may last (OpenAI's bound: then an error "
        "event, websocket_connection_limit_reached, and the connection closed; a client opens another)",
    )
    realtime_idle_seconds: float = Field(
        default=600.0, gt=0, description="how long a realtime session may go without a client event"
    )


class StoreSettings(BaseModel):
    """Where state lives (stored chat completions, responses) and what is stored."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(
        default=None,
        description="a database URL (sqlite:///path, postgresql://…), a file path, or `none` to store "
        "nothing; default: modelport.db in the user's data directory",
    )
    chat_completions: Literal["request", "always"] = Field(
        default="request", description="store chat completions that ask (`store: true`), or all of them"
    )
    background_timeout: float = Field(
        default=15.0,
        gt=0,
        description="seconds a background response's job may show no sign of life before it is taken for "
        "dead (its server stopped) and the response marked failed",
    )

    def resolved_url(self) -> str | None:
        """The database to use, or None when storing is off."""
        url = self.url or os.environ.get("MODELPORT_DATABASE") or str(data_dir() / "modelport.db")
        return None if url.lower() == "none" else url


class AuthSettings(BaseModel):
    """How keys are checked (projects and keys live in the store), and identity from an SSO provider."""

    model_config = ConfigDict(extra="forbid")

    required: bool = Field(
        default=False,
        description="every /v1 request needs a key even before any exists (a server that cannot reach "
        "its store then refuses requests rather than serving them without keys)",
    )
    key_cache_seconds: float = Field(
        default=5.0,
        ge=0,
        description="seconds a checked key is trusted before the store is asked again: a revoked key "
        "stops working within this time on every replica",
    )
    usage_flush_seconds: float = Field(
        default=2.0, gt=0, description="seconds between batched writes of usage records"
    )
    jwks_url: str | None = Field(
        default=None, description="accept JWT bearer tokens signed by a key of this JWKS (SSO)"
    )
    jwt_issuer: str | None = Field(default=None, description="the `iss` a JWT must have")
    jwt_audience: str | None = Field(default=None, description="the `aud` a JWT must have")
    jwt_project_claim: str = Field(
        default="project", description="the claim that names the project (by name or id)"
    )


class FileSettings(BaseModel):
    """Where uploaded files (batch inputs, batch outputs) are kept, and how large one may be."""

    model_config = ConfigDict(extra="forbid")

    dir: str | None = Field(default=None, description="default: files/ in the data directory")
    max_bytes: int = Field(default=512 * 1024 * 1024, ge=1, description="one upload (413 past it)")

    def folder(self) -> Path:
        """The folder files are kept in."""
        return Path(self.dir).expanduser() if self.dir else data_dir() / "files"


class BatchSettings(BaseModel):
    """How batches run beside live traffic."""

    model_config = ConfigDict(extra="forbid")

    concurrency: int = Field(default=16, ge=1, description="lines of one batch in flight at a time")
    share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="the share of a model's slots batch work may take (the rest stays free for live ones)",
    )
    lease: float = Field(
        default=10.0,
        gt=0,
        description="seconds a replica running a batch may go without renewing its lease before another "
        "replica (or the restarted one) takes the batch over",
    )


class VectorStoreSettings(BaseModel):
    """Files ingested into vector stores in the background."""

    model_config = ConfigDict(extra="forbid")

    lease: float = Field(
        default=15.0,
        ge=2,  # a heartbeat is kept in whole seconds: a shorter lease would see a fresh one as stale
        description="seconds a file being ingested may go without its replica's heartbeat before another "
        "replica (or the restarted one) takes it over",
    )


class WebRTCSettings(BaseModel):
    """Realtime calls over WebRTC (`POST /v1/realtime/calls`)."""

    model_config = ConfigDict(extra="forbid")

    addresses: list[str] = Field(
        default_factory=list,
        description="the addresses offered to clients as host candidates; default: every interface's, and "
        "loopback",
    )
    ice_servers: list[str] = Field(
        default_factory=list,
        description="STUN or TURN servers (`stun:host:port`, `turn:host:port?transport=udp`) for clients "
        "behind NAT; none is contacted unless named here",
    )
    max_calls: int = Field(default=16, ge=1, description="WebRTC calls in progress at once")
    connect_seconds: float = Field(
        default=10.0,
        gt=0,
        description="seconds a call's client has to connect (ICE and DTLS) after the answer, else the call "
        "ends and frees its place",
    )


def data_dir() -> Path:
    """Where modelport keeps what it stores: `MODELPORT_DATA_DIR`, else the user's data directory."""
    given = os.environ.get("MODELPORT_DATA_DIR")
    return Path(given) if given else Path(platformdirs.user_data_dir("modelport"))


class Settings(BaseModel):
    """Everything `create_app` and the in-process client need to know."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = 8000
    defaults: bool = Field(default=True, description="serve the default models")
    models: list[ModelConfig] = Field(default_factory=list)
    openai_aliases: bool = Field(default=True, description="map OpenAI's model names to the defaults")
    aliases: dict[str, str] = Field(default_factory=dict)
    preload: bool = Field(default=True, description="load every model at start-up, not on first use")
    max_upload_bytes: int = Field(default=25 * 1024 * 1024, ge=1)
    load_wait: float = Field(default=600.0, gt=0, description="seconds a request waits for a loading model")
    keep_alive: KeepAlive | None = Field(
        default=None,
        description="seconds an idle model stays loaded, or `forever`; default: forever for models loaded at "
        f"start-up, {LAZY_KEEP_ALIVE:.0f} for models loaded on first use",
    )
    memory_budget: ByteSize | None = Field(
        default=None,
        description="memory the loaded models may take together (bytes, or e.g. `12GiB`); past it the "
        "least recently used idle model is unloaded; default: 80% of RAM",
    )
    api_keys: list[str] = Field(default_factory=list, description="when set, /v1 needs one of these keys")
    protect_metrics: bool = Field(default=False, description="/metrics needs an API key too")
    open_metrics: bool = Field(
        default=False,
        description="/metrics stays open to anyone though projects have keys (it shows their usage)",
    )
    ui: bool = Field(default=True, description="serve the playground page at /")
    cors_origins: list[str] = Field(default_factory=list, description="origins browsers may call from")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="names requests may be addressed to (`Host`) besides localhost, IP addresses and this "
        "machine's name, when serving on a loopback address (a guard against DNS rebinding); `*` for any",
    )
    ray_ready_timeout: float = Field(
        default=600.0,
        gt=0,
        description="seconds `serve --ray` waits for every deployment to be ready before it stops, naming "
        "the ones that are not and Ray's reason",
    )
    remote_fetch: bool = Field(
        default=True, description="fetch the URLs requests give (files); off: such a part is a 400"
    )
    allow_fetch: list[str] = Field(
        default_factory=list,
        description="hosts, host:port or CIDRs fetched from although not public (and over http)",
    )
    limits: Limits = Field(default_factory=lambda: Limits())
    store: StoreSettings = Field(default_factory=lambda: StoreSettings())
    auth: AuthSettings = Field(default_factory=lambda: AuthSettings())
    files: FileSettings = Field(default_factory=lambda: FileSettings())
    batches: BatchSettings = Field(default_factory=lambda: BatchSettings())
    vector_stores: VectorStoreSettings = Field(default_factory=lambda: VectorStoreSettings())
    webrtc: WebRTCSettings = Field(default_factory=lambda: WebRTCSettings())

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str], **overrides: Any) -> Settings:
        """Read a `models.toml`; keyword overrides (from the command line) win."""
        with open(path, "rb") as f:
            data = tomllib.load(f)
        data.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise ValueError(config_errors.explained(error, cls, str(path))) from None

    def on_loopback(self) -> bool:
        """Whether the server listens on a loopback address only (this machine's clients alone reach it)."""
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return self.host == "localhost"

    def keep_alive_of(self, model: ModelConfig) -> float | None:
        """Seconds the model may stay loaded while idle; None for ever."""
        value = model.keep_alive or self.keep_alive or ("forever" if self.preload else LAZY_KEEP_ALIVE)
        return None if value == "forever" else float(value)

    def budget(self) -> int:
        """Bytes the loaded models may take together."""
        return int(self.memory_budget) if self.memory_budget is not None else int(0.8 * total_memory())

    def all_models(self) -> list[ModelConfig]:
        """The configured models, after the defaults unless they are switched off (realtime pipelines
        apart: they chain models rather than load one)."""
        return [m for m in self._configured() if m.engine != REALTIME]

    def pipelines(self) -> dict[str, RealtimePipeline]:
        """The realtime pipelines by id."""
        return {
            str(m.id): RealtimePipeline.model_validate({"id": m.id, **m.options})
            for m in self._configured()
            if m.engine == REALTIME
        }

    def _configured(self) -> list[ModelConfig]:
        configured = {m.id for m in self.models}
        base = [m for m in default_models() if m.id not in configured] if self.defaults else []
        return base + self.models

    def all_aliases(self) -> dict[str, str]:
        """Alias → model id, as configured (explicit aliases, which win over OpenAI's names)."""
        return dict(self.aliases)

    def openai_name(self, name: str) -> str | None:
        """The default model an OpenAI model name stands for by its family (`OPENAI_FAMILIES`), unless
        OpenAI's names are turned off; whether it is served is the registry's to say."""
        return openai_family(name) if self.openai_aliases else None

    def openai_target(self, name: str) -> str | None:
        """As `openai_name`, only where the default it reaches is configured here."""
        target = self.openai_name(name)
        return target if target in {m.id for m in self._configured()} else None

    def openai_families(self) -> list[tuple[str, str]]:
        """What each family of OpenAI's model names covers, and the served model it reaches."""
        if not self.openai_aliases:
            return []
        served = {m.id for m in self._configured()}
        return [(covers, target) for covers, _, target in OPENAI_FAMILIES if target in served]
