"""Checks a predictor's typed signature once, when it is registered, and records how to call it."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelport.errors import PredictorContractError
from modelport.predictors.abilities import (
    ChatFormatted,
    ChatTemplate,
    PromptScorer,
    TokenCounter,
    TokenSpans,
    Vocabulary,
    Voices,
)
from modelport.predictors.chat_format import PLAIN, ChatFormat
from modelport.predictors.parameter import TOOL_FORMATS, Parameter


class Capability(enum.StrEnum):
    """The OpenAI endpoint family a predictor serves."""

    CHAT = "chat"
    COMPLETION = "completion"
    EMBEDDING = "embedding"
    SPEECH = "speech"
    TRANSCRIPTION = "transcription"
    TRANSLATION = "translation"


# Which optional annotated parameters each capability can receive (by denotation).
_OPTIONS: dict[Capability, frozenset[str]] = {
    Capability.CHAT: frozenset(
        {
            "openai.chat.completions.temperature",
            "openai.chat.completions.top_p",
            "openai.chat.completions.max_output_tokens",
            "openai.chat.completions.presence_penalty",
            "openai.chat.completions.frequency_penalty",
            "openai.chat.completions.response_format",
            "openai.chat.completions.tools",
            "modelport.generation_options",
        }
    ),
    Capability.EMBEDDING: frozenset({"openai.embeddings.dims"}),
    Capability.SPEECH: frozenset({"openai.audio.speech.speed"}),
    Capability.TRANSCRIPTION: frozenset(
        {
            "openai.audio.transcriptions.language",
            "openai.audio.transcriptions.prompt",
            "openai.audio.transcriptions.timestamp_granularities",
            "openai.chat.completions.temperature",
        }
    ),
}
_OPTIONS[Capability.TRANSLATION] = _OPTIONS[Capability.TRANSCRIPTION] - {
    "openai.audio.transcriptions.language"
}
_OPTIONS[Capability.COMPLETION] = _OPTIONS[Capability.CHAT] - {"openai.chat.completions.tools"}


@dataclass(frozen=True)
class Predictor:
    """A checked predictor: the function plus what each of its parameters receives."""

    fn: Callable[..., Any]
    name: str
    capability: Capability
    input_param: str
    options: Mapping[str, str] = field(default_factory=dict)  # denotation -> parameter name
    voice_param: str | None = None
    voices: tuple[str, ...] = ()
    voice_type: Any = None
    sample_rate: int | None = None  # of the audio the predictor takes (transcription) or returns (speech)
    tool_format: str | None = None  # the native call format of a chat predictor that shows tools to its model
    chat_format: ChatFormat = PLAIN  # how a chat predictor's model writes its thinking and its calls
    token_prompts: bool = False  # a completion predictor whose prompt may be the model's own token ids
    # Abilities the predictor's object declares (see `abilities`); None where it has not got them.
    template: ChatTemplate | None = None
    scorer: PromptScorer | None = None
    vocabulary: Vocabulary | None = None
    token_counter: TokenCounter | None = None
    token_spans: TokenSpans | None = None
    media: tuple[str, ...] = ()  # what a chat predictor reads beside text (`image`), as its object says

    def accepts(self, denotation: str) -> bool:
        """Whether the predictor has a parameter for this OpenAI argument."""
        return denotation in self.options

    def __call__(
        self, primary: Any, options: Mapping[str, Any] | None = None, voice: str | None = None
    ) -> Any:
        """Call the function with its primary input and, of `options` (by denotation), those it declared."""
        kwargs: dict[str, Any] = {self.input_param: primary}
        if self.voice_param is not None:
            kwargs[self.voice_param] = self.voice_type(voice) if self._voice_is_enum() else voice
        for denotation, value in (options or {}).items():
            if value is not None and denotation in self.options:
                kwargs[self.options[denotation]] = value
        return self.fn(**kwargs)

    def _voice_is_enum(self) -> bool:
        return isinstance(self.voice_type, type) and issubclass(self.voice_type, enum.Enum)


def check_predictor(fn: Callable[..., Any], capability: Capability | str | None = None) -> Predictor:
    """Check `fn` against the predictor contract; raise `PredictorContractError` naming what is wrong."""
    name = _qualified_name(fn)
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(_annotated_target(fn), include_extras=True)
    except (TypeError, ValueError, NameError) as error:
        raise PredictorContractError(f"predictor `{name}`: cannot read its signature: {error}") from error

    params = list(signature.parameters.values())
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise PredictorContractError(
                f"predictor `{name}`: parameter `{p.name}` is variadic; name each parameter instead"
            )
    required = [p for p in params if p.default is p.empty]
    optional = [p for p in params if p.default is not p.empty]
    returns = _parameter_of(hints.get("return"), name, "the return value")

    cap = Capability(capability) if capability is not None else _infer(name, required, hints, returns)
    checked = _CHECKS[cap](fn, name, required, optional, hints, returns)
    return dataclasses.replace(
        checked,
        template=fn if cap is Capability.CHAT and isinstance(fn, ChatTemplate) else None,
        scorer=fn if cap is Capability.COMPLETION and isinstance(fn, PromptScorer) else None,
        vocabulary=fn if cap is Capability.COMPLETION and isinstance(fn, Vocabulary) else None,
        token_counter=fn if cap is Capability.EMBEDDING and isinstance(fn, TokenCounter) else None,
        token_spans=fn if cap is Capability.EMBEDDING and isinstance(fn, TokenSpans) else None,
        media=tuple(getattr(fn, "media", ())) if cap is Capability.CHAT else (),
    )


def _infer(
    name: str, required: list[inspect.Parameter], hints: dict[str, Any], returns: Parameter | None
) -> Capability:
    if returns is not None and returns.denotation == "embedding":
        return Capability.EMBEDDING
    if returns is not None and returns.denotation == "audio":
        return Capability.SPEECH
    for p in required:
        marker = _parameter_of(hints.get(p.name), name, f"parameter `{p.name}`")
        if marker is not None and marker.denotation == "audio":
            return Capability.TRANSCRIPTION
    if len(required) == 1:
        base = _strip(hints.get(required[0].name))
        if typing.get_origin(base) is list or base is list:
            return Capability.CHAT
        if base is str or _is_token_prompt(base):
            return Capability.COMPLETION
    raise PredictorContractError(
        f"predictor `{name}`: cannot tell which capability it serves. A chat predictor takes one `list` of "
        "messages; a completion predictor one `str` prompt; an embedding predictor returns "
        "`Annotated[np.ndarray, Parameter.Embedding]`; a speech predictor returns "
        "`Annotated[np.ndarray, Parameter.Audio(sample_rate=...)]`; a transcription predictor takes "
        "`Annotated[np.ndarray, Parameter.Audio(sample_rate=...)]`. Or name the capability when registering."
    )


def _check_chat_like(cap: Capability) -> Callable[..., Predictor]:
    def check(
        fn: Callable[..., Any],
        name: str,
        required: list[inspect.Parameter],
        optional: list[inspect.Parameter],
        hints: dict[str, Any],
        returns: Parameter | None,
    ) -> Predictor:
        wanted, wanted_text = (list, "a `list` of messages") if cap is Capability.CHAT else (str, "a `str`")
        if len(required) != 1:
            raise PredictorContractError(
                f"predictor `{name}`: a {cap} predictor takes exactly one required parameter, "
                f"{wanted_text}; it has {_names(required)}"
            )
        primary = required[0]
        base = _strip(hints.get(primary.name))
        token_prompts = cap is Capability.COMPLETION and _is_token_prompt(base)
        if (
            base is not None
            and base is not wanted
            and typing.get_origin(base) is not wanted
            and not token_prompts
        ):
            raise PredictorContractError(
                f"predictor `{name}`: parameter `{primary.name}` must be {wanted_text}"
                f"{' (or `str | list[int]` to take token ids too)' if cap is Capability.COMPLETION else ''}, "
                f"not {_show(base)}"
            )
        if returns is not None:
            raise PredictorContractError(
                f"predictor `{name}`: a {cap} predictor returns chunks or a whole completion, "
                f"not `{returns.denotation}`"
            )
        options = _options(name, cap, optional, hints)
        form = fn.chat_format if cap is Capability.CHAT and isinstance(fn, ChatFormatted) else PLAIN
        tools = options.get("openai.chat.completions.tools")
        marker = _parameter_of(hints.get(tools), name, f"parameter `{tools}`") if tools else None
        tool_format = marker.tool_format if marker else None
        if tools and tool_format is None and isinstance(fn, ChatTemplate):
            # Its template shows tools in this format, or shows none: then modelport describes the tools
            # in the prompt and the predictor never receives them.
            tool_format = fn.tool_format
            if tool_format is None:
                del options["openai.chat.completions.tools"]
        if tool_format is not None and tool_format not in TOOL_FORMATS:
            raise PredictorContractError(
                f"predictor `{name}`: parameter `{tools}` has tool format `{tool_format}`; "
                f"modelport knows {', '.join(TOOL_FORMATS)}"
            )
        if tools is None or tool_format is None:
            form = dataclasses.replace(form, calls=None)  # it never sees the tools: modelport describes them
        else:
            form = dataclasses.replace(form, calls=tool_format)
        return Predictor(
            fn,
            name,
            cap,
            primary.name,
            options,
            tool_format=tool_format,
            chat_format=form,
            token_prompts=token_prompts,
        )

    return check


def _is_token_prompt(annotation: Any) -> bool:
    """`str | list[int]`: a prompt given as text or as the model's own token ids."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return False
    args = {a for a in typing.get_args(annotation) if a is not type(None)}
    return args == {str, list[int]}


def _check_embedding(
    fn: Callable[..., Any],
    name: str,
    required: list[inspect.Parameter],
    optional: list[inspect.Parameter],
    hints: dict[str, Any],
    returns: Parameter | None,
) -> Predictor:
    if len(required) != 1:
        raise PredictorContractError(
            f"predictor `{name}`: an embedding predictor takes exactly one required parameter, "
            f"a `list[str]`; it has {_names(required)}"
        )
    primary = required[0]
    base = _strip(hints.get(primary.name))
    if typing.get_origin(base) is not list or typing.get_args(base) != (str,):
        raise PredictorContractError(
            f"predictor `{name}`: parameter `{primary.name}` must be `list[str]`, not {_show(base)}"
        )
    if returns is None or returns.denotation != "embedding" or _strip(hints["return"]) is not np.ndarray:
        raise PredictorContractError(
            f"predictor `{name}`: an embedding predictor must return "
            "`Annotated[np.ndarray, Parameter.Embedding]`"
        )
    options = _options(name, Capability.EMBEDDING, optional, hints)
    if "openai.embeddings.dims" in options:
        _require_type(name, options["openai.embeddings.dims"], hints, int, "`int`")
    return Predictor(fn, name, Capability.EMBEDDING, primary.name, options)


def _check_speech(
    fn: Callable[..., Any],
    name: str,
    required: list[inspect.Parameter],
    optional: list[inspect.Parameter],
    hints: dict[str, Any],
    returns: Parameter | None,
) -> Predictor:
    if len(required) != 2:
        raise PredictorContractError(
            f"predictor `{name}`: a speech predictor takes exactly two required parameters, the input "
            f"`str` and a voice annotated `Parameter.AudioVoice`; it has {_names(required)}"
        )
    voice = [p for p in required if _marker(name, hints, p, "openai.audio.speech.voice")]
    if len(voice) != 1:
        raise PredictorContractError(
            f"predictor `{name}`: exactly one required parameter must be annotated `Parameter.AudioVoice`"
        )
    text = next(p for p in required if p is not voice[0])
    if _strip(hints.get(text.name)) not in (str, None):
        raise PredictorContractError(
            f"predictor `{name}`: parameter `{text.name}` must be the input `str`, "
            f"not {_show(_strip(hints.get(text.name)))}"
        )
    voice_type = _strip(hints.get(voice[0].name))
    declared = fn if isinstance(fn, Voices) else None
    if voice_type is str and declared is not None:
        voices = tuple(declared.voices)  # known once loaded (a voice file's), declared by the object
    else:
        voices = _voices(name, voice[0].name, voice_type)
    if returns is None or returns.denotation != "audio" or _strip(hints["return"]) is not np.ndarray:
        raise PredictorContractError(
            f"predictor `{name}`: a speech predictor must return "
            "`Annotated[np.ndarray, Parameter.Audio(sample_rate=...)]`"
        )
    sample_rate = returns.sample_rate or (declared.sample_rate if declared is not None else None)
    if sample_rate is None:
        raise PredictorContractError(
            f"predictor `{name}`: the return value uses `Parameter.Audio` without its required arguments: "
            "give `sample_rate=...` (or declare `sample_rate` and `voices` on the predictor object)"
        )
    options = _options(name, Capability.SPEECH, optional, hints)
    if "openai.audio.speech.speed" in options:
        _require_type(name, options["openai.audio.speech.speed"], hints, float, "`float`")
    return Predictor(
        fn,
        name,
        Capability.SPEECH,
        text.name,
        options,
        voice_param=voice[0].name,
        voices=voices,
        voice_type=voice_type,
        sample_rate=sample_rate,
    )


def _check_audio_to_text(cap: Capability) -> Callable[..., Predictor]:
    def check(
        fn: Callable[..., Any],
        name: str,
        required: list[inspect.Parameter],
        optional: list[inspect.Parameter],
        hints: dict[str, Any],
        returns: Parameter | None,
    ) -> Predictor:
        audio = [p for p in required if _marker(name, hints, p, "audio")]
        if len(required) != 1 or len(audio) != 1:
            raise PredictorContractError(
                f"predictor `{name}`: a {cap} predictor takes exactly one required parameter, "
                f"`Annotated[np.ndarray, Parameter.Audio(sample_rate=...)]`; it has {_names(required)}"
            )
        if _strip(hints.get(audio[0].name)) is not np.ndarray:
            raise PredictorContractError(
                f"predictor `{name}`: parameter `{audio[0].name}` must be `np.ndarray`"
            )
        marker = _parameter_of(hints.get(audio[0].name), name, f"parameter `{audio[0].name}`")
        assert marker is not None
        if marker.sample_rate is None:
            raise PredictorContractError(
                f"predictor `{name}`: parameter `{audio[0].name}` uses `Parameter.Audio` without its "
                "required arguments: give `sample_rate=...`"
            )
        options = _options(name, cap, optional, hints)
        return Predictor(fn, name, cap, audio[0].name, options, sample_rate=marker.sample_rate)

    return check


_CHECKS: dict[Capability, Callable[..., Predictor]] = {
    Capability.CHAT: _check_chat_like(Capability.CHAT),
    Capability.COMPLETION: _check_chat_like(Capability.COMPLETION),
    Capability.EMBEDDING: _check_embedding,
    Capability.SPEECH: _check_speech,
    Capability.TRANSCRIPTION: _check_audio_to_text(Capability.TRANSCRIPTION),
    Capability.TRANSLATION: _check_audio_to_text(Capability.TRANSLATION),
}


def _options(
    name: str, cap: Capability, optional: list[inspect.Parameter], hints: dict[str, Any]
) -> dict[str, str]:
    options: dict[str, str] = {}
    for p in optional:
        marker = _parameter_of(hints.get(p.name), name, f"parameter `{p.name}`")
        if marker is None:
            continue  # an unannotated optional parameter keeps its default
        if marker.denotation not in _OPTIONS.get(cap, frozenset()):
            raise PredictorContractError(
                f"predictor `{name}`: parameter `{p.name}` is annotated `{marker.denotation}`, "
                f"which a {cap} predictor cannot receive"
            )
        if marker.denotation in options:
            raise PredictorContractError(
                f"predictor `{name}`: parameters `{options[marker.denotation]}` and `{p.name}` "
                f"both receive `{marker.denotation}`"
            )
        options[marker.denotation] = p.name
    return options


def _voices(name: str, param: str, voice_type: Any) -> tuple[str, ...]:
    if typing.get_origin(voice_type) is typing.Literal:
        values = typing.get_args(voice_type)
        if values and all(isinstance(v, str) for v in values):
            return tuple(values)
    if isinstance(voice_type, type) and issubclass(voice_type, str) and issubclass(voice_type, enum.Enum):
        return tuple(member.value for member in voice_type)
    raise PredictorContractError(
        f"predictor `{name}`: parameter `{param}` must be a `Literal[...]` of voice names or a `StrEnum`, "
        f"not {_show(voice_type)}"
    )


def _require_type(name: str, param: str, hints: dict[str, Any], wanted: type, text: str) -> None:
    base = _strip(hints.get(param))
    if base is not None and base is not wanted:
        raise PredictorContractError(
            f"predictor `{name}`: parameter `{param}` must be {text}, not {_show(base)}"
        )


def _marker(name: str, hints: dict[str, Any], p: inspect.Parameter, denotation: str) -> bool:
    marker = _parameter_of(hints.get(p.name), name, f"parameter `{p.name}`")
    return marker is not None and marker.denotation == denotation


def _parameter_of(annotation: Any, name: str, where: str) -> Parameter | None:
    """The `Parameter` in an `Annotated[...]`, accepting the bare classmethod as shorthand."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return None
    for meta in annotation.__metadata__:
        if isinstance(meta, Parameter):
            return meta
        if inspect.ismethod(meta) and meta.__self__ is Parameter:
            try:
                made = meta()
            except TypeError as error:
                raise PredictorContractError(
                    f"predictor `{name}`: {where} uses `Parameter.{meta.__name__}` without its "
                    f"required arguments ({error})"
                ) from error
            assert isinstance(made, Parameter)
            return made
    return None


def _strip(annotation: Any) -> Any:
    """The type under `Annotated[...]` and `X | None`."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _strip(args[0])
    return annotation


def _annotated_target(fn: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        return fn
    return type(fn).__call__  # a callable object: its __call__ carries the hints


def _qualified_name(fn: Callable[..., Any]) -> str:
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def _names(params: list[inspect.Parameter]) -> str:
    return ", ".join(f"`{p.name}`" for p in params) if params else "none"


def _show(annotation: Any) -> str:
    return "no annotation" if annotation is None else f"`{getattr(annotation, '__name__', annotation)}`"
