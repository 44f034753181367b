"""OpenAI's Realtime API on the models modelport serves: a pipeline (`engine = "realtime"` in models.toml)
chains speech detection, a transcription model, a chat model and a speech model (reached through
`pipes`). `Realtime.open` starts a session for a connection once the pipeline's models are loaded; the
session (`session`) serves the client's events by family (`input_audio`, `item_events`, `responding`),
the response (`responses`) streams the answer, `conversation` holds the items, `turns` finds where speech
starts and stops, `audio` converts the formats, `config` merges `session.update`s, `realtime_events`
checks every event against the openai package's types."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from openai.types.realtime import ClientSecretCreateResponse

from modelport import context
from modelport.errors import InvalidRequestError, ModelNotFoundError
from modelport.ids import new_id
from modelport.predictors.manager import ModelManager
from modelport.protocol.requests import ClientSecretCreate
from modelport.service.access import Access
from modelport.service.realtime import config
from modelport.service.realtime.held_calls import HeldCalls
from modelport.service.realtime.pipes import Pipes, VoiceModels
from modelport.service.realtime.realtime_events import ClientEventError, Outgoing
from modelport.service.realtime.session import RealtimeSession
from modelport.settings import DEFAULT_REALTIME, RealtimePipeline, Settings

__all__ = ["Realtime", "RealtimeSession"]


class Realtime:
    """Opens realtime sessions on the configured pipelines."""

    def __init__(
        self,
        settings: Settings,
        manager: ModelManager,
        models: VoiceModels,
        access: Access,
    ) -> None:
        self.settings, self.manager, self.models = settings, manager, models
        self.access = access
        self.pipelines = settings.pipelines()
        self._aliases = settings.all_aliases()
        self.calls = HeldCalls()  # the WebRTC calls in progress (the HTTP face opens them)

    def pipeline(self, name: str | None) -> RealtimePipeline:
        """The pipeline a `model` names (OpenAI's realtime model names are the default one); a 404
        otherwise."""
        wanted = self._aliases.get(name, name) if name else DEFAULT_REALTIME
        if wanted not in self.pipelines and name:
            wanted = self.settings.openai_name(name) or wanted  # gpt-realtime-mini-2025-10-06, …
        if wanted not in self.pipelines:
            raise ModelNotFoundError(name or DEFAULT_REALTIME)
        return self.pipelines[wanted]

    def configured(self, given: dict[str, Any] | None) -> config.Session:
        """The whole configuration a session given `given` (a `session` as `session.update` takes it)
        starts with; a 400 naming what is wrong (`session.…`)."""
        given = dict(given or {"type": "realtime"})
        kind = "transcription" if given.get("type") == "transcription" else "realtime"
        model = given.get("model") if kind == "realtime" else None
        pipeline = self.pipeline(model if isinstance(model, str) else None)
        try:
            return config.updated(config.initial(pipeline, kind, model or pipeline.id), given)
        except ClientEventError as error:
            where = error.param or ""
            param = where if where.startswith("session") else f"session.{where}".rstrip(".")
            raise InvalidRequestError(error.message, param=param) from None

    async def client_secret(self, body: ClientSecretCreate) -> ClientSecretCreateResponse:
        """A client secret for the caller's project that opens sessions configured as `body.session`: one
        request of the model its sessions talk with (or transcribe with), under the caller's rate limits,
        its instructions bounded as a request's input."""
        session = self.configured(body.session)
        instructions = session.get("instructions") or ""
        if len(instructions) > self.settings.limits.input_chars:
            raise InvalidRequestError(
                f"session.instructions is {len(instructions)} characters; the most is "
                f"{self.settings.limits.input_chars} ([limits] input_chars).",
                param="session.instructions",
            )
        pipeline = self.pipeline(session.get("model") if session.get("type") != "transcription" else None)
        await self.access.admit(
            pipeline.transcription if session.get("type") == "transcription" else pipeline.chat
        )
        seconds = body.expires_after.seconds if body.expires_after is not None else 600
        value, expires_at = await self.access.secrets.mint(context.current(), session, seconds)
        shown = {**session, "id": new_id("sess", "_"), "object": "realtime.session"}
        return ClientSecretCreateResponse.model_validate(
            {"value": value, "expires_at": expires_at, "session": shown}
        )

    async def open(
        self,
        model: str | None,
        intent: str | None,
        send: Callable[[Outgoing], Awaitable[None]],
        beta_protocol: bool = False,
        given: config.Session | None = None,
        media: bool = False,
    ) -> RealtimeSession:
        """A session on the pipeline `model` names (or the default), its models loaded, `session.created`
        sent. `intent=transcription` opens a transcription session; `beta_protocol`, one that speaks the
        beta protocol (`beta`); `given`, one configured as a client secret's session (its model and kind
        win over the URL's); `media`, one whose transport carries the audio (`RealtimeSession.playout`)."""
        if given is not None:
            intent = "transcription" if given.get("type") == "transcription" else None
            model = given.get("model") or model
        pipeline = self.pipeline(model)
        kind = "transcription" if intent == "transcription" else "realtime"
        needed = [pipeline.transcription] if kind == "transcription" else [
            pipeline.transcription, pipeline.chat, pipeline.speech,
        ]  # fmt: skip
        await asyncio.gather(*(self.manager.get(name) for name in needed))

        pipes = Pipes(self.models, pipeline)
        session = RealtimeSession(
            pipeline, kind, model or pipeline.id, pipes, self.settings.limits, send, beta_protocol, media
        )
        if given is not None:
            session.configure(given)
        await session.start()
        return session
