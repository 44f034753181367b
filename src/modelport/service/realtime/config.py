"""A realtime session's configuration: what `session.created` shows first (the pipeline's defaults), and
each `session.update` merged into it, older (beta) field names read as their GA places, the whole checked
by the openai package's session types. Fields no engine here uses (`tracing`, `noise_reduction`,
`truncation`, `prompt`) are accepted and kept as sent."""

from __future__ import annotations

import copy
from typing import Any

from openai.types.realtime import RealtimeSessionCreateRequest, RealtimeTranscriptionSessionCreateRequest
from pydantic import ValidationError

from modelport.service.realtime.realtime_events import ClientEventError, invalid
from modelport.settings import RealtimePipeline

Session = dict[str, Any]
PCM = {"type": "audio/pcm", "rate": 24000}
_LEGACY_FORMATS: dict[str, dict[str, Any]] = {
    "pcm16": PCM,
    "g711_ulaw": {"type": "audio/pcmu"},
    "g711_alaw": {"type": "audio/pcma"},
}
SERVER_VAD = {
    "type": "server_vad",
    "threshold": 0.5,
    "prefix_padding_ms": 300,
    "silence_duration_ms": 500,
    "create_response": True,
    "interrupt_response": True,
}


def initial(pipeline: RealtimePipeline, kind: str, model: str) -> Session:
    """The configuration a session starts with."""
    if kind == "transcription":
        return {
            "type": "transcription",
            "audio": {
                "input": {
                    "format": dict(PCM),
                    "transcription": {"model": pipeline.transcription},
                    "turn_detection": dict(SERVER_VAD),
                }
            },
        }
    return {
        "type": "realtime",
        "model": model,
        "output_modalities": ["audio"],
        "instructions": pipeline.instructions,
        "audio": {
            "input": {"format": dict(PCM), "transcription": None, "turn_detection": dict(SERVER_VAD)},
            "output": {"format": dict(PCM), "voice": pipeline.voice, "speed": 1.0},
        },
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
    }


def updated(current: Session, given: dict[str, Any]) -> Session:
    """`current` with a `session.update`'s fields merged in (objects key by key, the rest replaced); the
    fields the server shows of a session (its id, object and expiry) are not the client's to set, and a
    client that sends back the session it was shown changes none of them."""
    given = {k: v for k, v in _ga(given).items() if k not in _SHOWN_BY_SERVER}
    if given.get("type") not in (None, current["type"]):
        raise ClientEventError(
            f"A {current['type']} session cannot become a {given['type']} session.", param="session.type"
        )
    for tool in given.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") != "function":
            raise ClientEventError(
                f"Tools of type '{tool.get('type')}' are not served in realtime sessions here; "
                "function tools are.",
                param="session.tools",
            )
    merged = _merged(copy.deepcopy(current), given)
    cls = (
        RealtimeSessionCreateRequest
        if merged["type"] == "realtime"
        else RealtimeTranscriptionSessionCreateRequest
    )
    try:
        cls.model_validate(merged)
    except ValidationError as error:
        raise invalid(error, "session") from None
    if len(merged.get("output_modalities") or []) > 1:
        raise ClientEventError(
            "output_modalities is ['audio'] (audio and its transcript) or ['text'], not both.",
            param="session.output_modalities",
        )
    return merged


_SHOWN_BY_SERVER = {"id", "object", "expires_at", "client_secret"}
_MERGED = {"audio", "input", "output"}  # objects merged key by key; any other value is replaced whole


def _merged(base: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    for key, value in given.items():
        if key in _MERGED and isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = _merged(base[key], value)
        else:
            base[key] = value
    return base


def _ga(given: dict[str, Any]) -> dict[str, Any]:
    """Beta field names in their GA places: `modalities`, `voice`, `input_audio_format`,
    `output_audio_format`, `turn_detection`, `input_audio_transcription`, `speed`."""
    given = dict(given)
    audio: dict[str, Any] = copy.deepcopy(given.get("audio") or {})
    put_in = {"input": audio.setdefault("input", {}), "output": audio.setdefault("output", {})}
    moves = {
        "voice": ("output", "voice"),
        "speed": ("output", "speed"),
        "turn_detection": ("input", "turn_detection"),
        "input_audio_transcription": ("input", "transcription"),
    }
    for old, (side, new) in moves.items():
        if old in given:
            put_in[side][new] = given.pop(old)
    for old, side in (("input_audio_format", "input"), ("output_audio_format", "output")):
        if old in given:
            fmt = given.pop(old)
            put_in[side]["format"] = legacy_format(fmt)
    if "modalities" in given:
        modalities = given.pop("modalities") or []
        given["output_modalities"] = ["audio"] if "audio" in modalities else ["text"]
    if given.get("type") == "transcription_session.update":  # a beta transcription session's own name
        given.pop("type")
    audio = {side: values for side, values in audio.items() if values}
    if audio:
        given["audio"] = audio
    return given


def legacy_format(fmt: Any) -> Any:
    """An audio format as the GA protocol names it, from its beta name (`pcm16`, `g711_ulaw`, …)."""
    known = _LEGACY_FORMATS.get(fmt) if isinstance(fmt, str) else None
    return dict(known) if known is not None else fmt


def turn_detection(session: Session) -> dict[str, Any] | None:
    return ((session.get("audio") or {}).get("input") or {}).get("turn_detection")


def input_format(session: Session) -> str:
    return str(
        (((session.get("audio") or {}).get("input") or {}).get("format") or PCM).get("type") or "audio/pcm"
    )


def output_format(session: Session) -> dict[str, Any]:
    return dict(((session.get("audio") or {}).get("output") or {}).get("format") or PCM)


def transcription(session: Session) -> dict[str, Any] | None:
    return ((session.get("audio") or {}).get("input") or {}).get("transcription")


def voice(session: Session) -> str:
    given = ((session.get("audio") or {}).get("output") or {}).get("voice") or "alloy"
    return str(given.get("id") if isinstance(given, dict) else given)
