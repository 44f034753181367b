"""The Realtime API's beta protocol, for clients written before the GA one (the openai SDK's
`client.beta.realtime`, browsers that offer the `openai-beta.realtime-v1` subprotocol): the session runs
the GA protocol, and at the edge each server event is shown as the beta one (its older name, the session
and response shaped as beta showed them, assistant content as `text`/`audio`) and each client event read
into its GA shape. Server events the beta protocol never had are not sent to beta clients; each beta
event sent is checked against the openai package's beta types, as GA events are against theirs."""

from __future__ import annotations

import copy
import functools
from typing import Any, cast

from openai import BaseModel as OpenAIModel
from pydantic import BaseModel

from modelport.protocol.tagged_unions import by_type
from modelport.service.realtime import config

_RENAMED = {
    "conversation.item.added": "conversation.item.created",
    "response.output_text.delta": "response.text.delta",
    "response.output_text.done": "response.text.done",
    "response.output_audio.delta": "response.audio.delta",
    "response.output_audio.done": "response.audio.done",
    "response.output_audio_transcript.delta": "response.audio_transcript.delta",
    "response.output_audio_transcript.done": "response.audio_transcript.done",
}
_CONTENT_TO_BETA = {"output_text": "text", "output_audio": "audio"}
_CONTENT_TO_GA = {"text": "output_text", "audio": "output_audio"}
_FORMATS = {"audio/pcm": "pcm16", "audio/pcmu": "g711_ulaw", "audio/pcma": "g711_alaw"}


@functools.cache
def beta_events() -> dict[str, type[BaseModel]]:
    """The beta server events by type, read on the first beta connection: the openai package's beta types
    take half a second to import, which a server whose clients speak GA should not spend at its start."""
    from openai.types.beta.realtime import RealtimeServerEvent  # here, not at the top: see above

    return by_type(RealtimeServerEvent)


def wants_beta(headers: dict[str, str] | Any, offered: list[str]) -> bool:
    """Whether a connection asks for the beta protocol: the `OpenAI-Beta: realtime=v1` header (the SDK's
    beta client) or the `openai-beta.realtime-v1` subprotocol (a browser, which cannot set headers)."""
    return "realtime=v1" in (headers.get("openai-beta") or "") or "openai-beta.realtime-v1" in offered


def server_event(event: BaseModel, transcription: bool) -> BaseModel | None:
    """The beta form of a GA server event (as the openai package's beta class), or None where the beta
    protocol has no such event."""
    ga = event.model_dump(mode="json", exclude_unset=True)
    kind = str(_RENAMED.get(ga["type"], ga["type"]))
    if transcription and kind == "session.updated":
        kind = "transcription_session.updated"
    beta = {**ga, "type": kind}
    if "session" in beta:
        beta["session"] = _session(beta["session"], transcription)
    if "item" in beta:
        beta["item"] = _item(beta["item"])
    if "response" in beta:
        beta["response"] = _response(beta["response"])
    cls = beta_events().get(kind)
    if cls is None:
        return None
    if kind == "transcription_session.updated":
        # Its beta type wants a client secret, which a session opened on this socket has none of: made as
        # given, unchecked (the SDK's `construct`, which builds the nested models all the same).
        return cast("type[OpenAIModel]", cls).construct(**beta)
    return cls.model_validate(beta)  # what the beta SDK reads is what goes out


def client_event(data: Any) -> Any:
    """A beta client event in its GA shape (`session.update`'s beta fields are read by `config`)."""
    if not isinstance(data, dict):
        return data
    data = copy.deepcopy(data)
    if data.get("type") == "conversation.item.create" and isinstance(data.get("item"), dict):
        data["item"] = _ga_item(data["item"])
    if data.get("type") == "response.create" and isinstance(data.get("response"), dict):
        data["response"] = _ga_response(data["response"])
    return data


def _session(session: dict[str, Any], transcription: bool) -> dict[str, Any]:
    audio = session.get("audio") or {}
    heard, said = audio.get("input") or {}, audio.get("output") or {}
    shown: dict[str, Any] = {
        "id": session.get("id"),
        "object": "realtime.session" if not transcription else "realtime.transcription_session",
        "input_audio_format": _format(heard.get("format")),
        "input_audio_transcription": heard.get("transcription"),
        "turn_detection": heard.get("turn_detection"),
        "expires_at": session.get("expires_at"),
    }
    if transcription:
        return {**shown, "modalities": ["text"]}
    return {
        **shown,
        "model": session.get("model"),
        "modalities": _modalities(session.get("output_modalities")),
        "instructions": session.get("instructions"),
        "voice": config.voice(session),
        "output_audio_format": _format(said.get("format")),
        "speed": said.get("speed"),
        "tools": session.get("tools") or [],
        "tool_choice": _tool_choice(session.get("tool_choice")),
        "max_response_output_tokens": session.get("max_output_tokens"),
    }


def _response(response: dict[str, Any]) -> dict[str, Any]:
    shown = {k: v for k, v in response.items() if k not in ("output_modalities", "audio", "output")}
    said = (response.get("audio") or {}).get("output") or {}
    shown["modalities"] = _modalities(response.get("output_modalities"))
    if said:
        shown["voice"] = said.get("voice")
        shown["output_audio_format"] = _format(said.get("format"))
    if "output" in response:
        shown["output"] = [_item(item) for item in response["output"]]
    return shown


def _item(item: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(item.get("content"), list):
        return item
    content = [
        {**part, "type": _CONTENT_TO_BETA.get(part.get("type"), part.get("type"))} for part in item["content"]
    ]
    return {**item, "content": content}


def _ga_item(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("role") != "assistant" or not isinstance(item.get("content"), list):
        return item
    content = [
        {**part, "type": _CONTENT_TO_GA.get(str(part.get("type")), part.get("type"))}
        if isinstance(part, dict)
        else part
        for part in item["content"]
    ]
    return {**item, "content": content}


def _ga_response(response: dict[str, Any]) -> dict[str, Any]:
    """`response.create`'s beta parameters in their GA places."""
    given = dict(response)
    output: dict[str, Any] = {}
    if "modalities" in given:
        modalities = given.pop("modalities") or []
        given["output_modalities"] = ["audio"] if "audio" in modalities else ["text"]
    if "voice" in given:
        output["voice"] = given.pop("voice")
    if "output_audio_format" in given:
        output["format"] = config.legacy_format(given.pop("output_audio_format"))
    if "max_response_output_tokens" in given:
        given["max_output_tokens"] = given.pop("max_response_output_tokens")
    given.pop("temperature", None)  # beta only; the GA protocol (and this pipeline) takes none per response
    if output:
        audio = dict(given.get("audio") or {})
        audio["output"] = {**(audio.get("output") or {}), **output}
        given["audio"] = audio
    if isinstance(given.get("input"), list):
        given["input"] = [_ga_item(i) if isinstance(i, dict) else i for i in given["input"]]
    return given


def _modalities(output: list[str] | None) -> list[str]:
    """Beta's `modalities`: audio always came with its transcript as text."""
    return ["text", "audio"] if "audio" in (output or ["audio"]) else ["text"]


def _format(fmt: Any) -> Any:
    if isinstance(fmt, dict):
        return _FORMATS.get(fmt.get("type") or "audio/pcm", "pcm16")
    return fmt


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict):
        return choice.get("name") or "required"
    return choice or "auto"
