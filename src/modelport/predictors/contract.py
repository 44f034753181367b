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
    FillsInTheMiddle,
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
    fills_in_the_middle: bool = False  # a completion predictor that completes before a `suffix`
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
    checked = _checked(_Signature(fn, name, cap, required, optional, hints, returns))
    return dataclasses.replace(
        checked,
        template=fn if cap is Capability.CHAT and isinstance(fn, ChatTemplate) else None,
        scorer=fn if cap is Capability.COMPLETION and isinstance(fn, PromptScorer) else None,
        vocabulary=fn if cap is Capability.COMPLETION and isinstance(fn, Vocabulary) else None,
        token_counter=fn if cap is Capability.EMBEDDING and isinstance(fn, TokenCounter) else None,
        token_spans=fn if cap is Capability.EMBEDDING and isinstance(fn, TokenSpans) else None,
        fills_in_the_middle=cap is Capability.COMPLETION
        and isinstance(fn, FillsInTheMiddle)
        and fn.fills_in_the_middle,
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


@dataclass(frozen=True)
class _Signature:
    """What a predictor's signature says, read once."""

    fn: Callable[..., Any]
    name: str
    cap: Capability
    required: list[inspect.Parameter]
    optional: list[inspect.Parameter]
    hints: dict[str, Any]
    returns: Parameter | None

    def error(self, problem: str) -> PredictorContractError:
        return PredictorContractError(f"predictor `{self.name}`: {problem}")

    def base(self, param: str | None) -> Any:
        return _strip(self.hints.get(param)) if param is not None else None

    def marker(self, p: inspect.Parameter) -> Parameter | None:
        return _parameter_of(self.hints.get(p.name), self.name, f"parameter `{p.name}`")


@dataclass(frozen=True)
class _CapabilityShape:
    """A capability's predictor: its one input (a speech predictor has a voice beside it), what it
    returns, and the options it may receive, each with the type its parameter must have (None: any).
    `finish` reads what is particular to the capability (tools, voices, sample rates) into the
    `Predictor` the common checks made."""

    takes: str  # the input as errors name it
    fits: Callable[[Any], bool]  # whether the input's type (under `Annotated` and `| None`) is it
    must_be: str  # what the input must be, when it is not
    returns: str | None  # the denotation it returns; None: chunks or a whole completion
    returns_text: str
    options: Mapping[str, type | None]
    voiced: bool = False
    input_marker: str | None = None  # the denotation the input is annotated with
    returns_anything: bool = False  # a transcript's shape is the predictor's (text, or segments too)
    finish: Callable[[_Signature, Predictor], Predictor] = lambda _, predictor: predictor  # nothing more


def _chat_finish(signature: _Signature, predictor: Predictor) -> Predictor:
    """A chat predictor's tool format (its tools parameter's, or its template's) and how its model writes
    thinking and calls; a completion predictor's token-id prompts."""
    fn, options = signature.fn, dict(predictor.options)
    if signature.cap is Capability.COMPLETION:
        return dataclasses.replace(
            predictor, token_prompts=_is_token_prompt(signature.base(predictor.input_param))
        )
    form = fn.chat_format if isinstance(fn, ChatFormatted) else PLAIN
    tools = options.get("openai.chat.completions.tools")
    marker = (
        _parameter_of(signature.hints.get(tools), signature.name, f"parameter `{tools}`") if tools else None
    )
    tool_format = marker.tool_format if marker else None
    if tools and tool_format is None and isinstance(fn, ChatTemplate):
        # Its template shows tools in this format, or shows none: then modelport describes the tools
        # in the prompt and the predictor never receives them.
        tool_format = fn.tool_format
        if tool_format is None:
            del options["openai.chat.completions.tools"]
    if tool_format is not None and tool_format not in TOOL_FORMATS:
        raise signature.error(
            f"parameter `{tools}` has tool format `{tool_format}`; modelport knows {', '.join(TOOL_FORMATS)}"
        )
    # It never sees the tools unless it takes them in a format it names: modelport describes them.
    form = dataclasses.replace(form, calls=tool_format if tools is not None else None)
    return dataclasses.replace(predictor, options=options, tool_format=tool_format, chat_format=form)


def _speech_finish(signature: _Signature, predictor: Predictor) -> Predictor:
    """Its voices (a `Literal` or `StrEnum`, or what its object declares once loaded) and sample rate."""
    assert predictor.voice_param is not None
    voice_type = signature.base(predictor.voice_param)
    declared = signature.fn if isinstance(signature.fn, Voices) else None
    if voice_type is str and declared is not None:
        voices = tuple(declared.voices)  # known once loaded (a voice file's), declared by the object
    else:
        voices = _voices(signature.name, predictor.voice_param, voice_type)
    assert signature.returns is not None
    sample_rate = signature.returns.sample_rate or (declared.sample_rate if declared is not None else None)
    if sample_rate is None:
        raise signature.error(
            "the return value uses `Parameter.Audio` without its required arguments: give `sample_rate=...` "
            "(or declare `sample_rate` and `voices` on the predictor object)"
        )
    return dataclasses.replace(predictor, voices=voices, voice_type=voice_type, sample_rate=sample_rate)


def _heard_finish(signature: _Signature, predictor: Predictor) -> Predictor:
    """The sample rate of the audio it takes."""
    primary = next(p for p in signature.required if p.name == predictor.input_param)
    marker = signature.marker(primary)
    assert marker is not None
    if marker.sample_rate is None:
        raise signature.error(
            f"parameter `{primary.name}` uses `Parameter.Audio` without its required arguments: give "
            "`sample_rate=...`"
        )
    return dataclasses.replace(predictor, sample_rate=marker.sample_rate)


_GENERATION: dict[str, type | None] = {
    "openai.chat.completions.temperature": None,
    "openai.chat.completions.top_p": None,
    "openai.chat.completions.max_output_tokens": None,
    "openai.chat.completions.presence_penalty": None,
    "openai.chat.completions.frequency_penalty": None,
    "openai.chat.completions.response_format": None,
    "modelport.generation_options": None,
}
_HEARING: dict[str, type | None] = {
    "openai.audio.transcriptions.prompt": None,
    "openai.audio.transcriptions.timestamp_granularities": None,
    "openai.chat.completions.temperature": None,
}
_SHAPES: dict[Capability, _CapabilityShape] = {
    Capability.CHAT: _CapabilityShape(
        "a `list` of messages",
        lambda base: base is None or base is list or typing.get_origin(base) is list,
        "a `list` of messages",
        None,
        "chunks or a whole completion",
        {**_GENERATION, "openai.chat.completions.tools": None},
        finish=_chat_finish,
    ),
    Capability.COMPLETION: _CapabilityShape(
        "a `str`",
        lambda base: base is None or base is str or _is_token_prompt(base),
        "a `str` (or `str | list[int]` to take token ids too)",
        None,
        "chunks or a whole completion",
        _GENERATION,
        finish=_chat_finish,
    ),
    Capability.EMBEDDING: _CapabilityShape(
        "a `list[str]`",
        lambda base: typing.get_origin(base) is list and typing.get_args(base) == (str,),
        "`list[str]`",
        "embedding",
        "`Annotated[np.ndarray, Parameter.Embedding]`",
        {"openai.embeddings.dims": int},
    ),
    Capability.SPEECH: _CapabilityShape(
        "the input `str` and a voice annotated `Parameter.AudioVoice`",
        lambda base: base in (str, None),
        "the input `str`",
        "audio",
        "`Annotated[np.ndarray, Parameter.Audio(sample_rate=...)]`",
        {"openai.audio.speech.speed": float},
        voiced=True,
        finish=_speech_finish,
    ),
    Capability.TRANSCRIPTION: _CapabilityShape(
        "`Annotated[np.ndarray, Parameter.Audio(sample_rate=...)]`",
        lambda base: base is np.ndarray,
        "`np.ndarray`",
        None,
        "",
        {**_HEARING, "openai.audio.transcriptions.language": None},
        input_marker="audio",
        returns_anything=True,
        finish=_heard_finish,
    ),
}
# A translation's predictor is a transcription's, but that the language is always English.
_SHAPES[Capability.TRANSLATION] = dataclasses.replace(_SHAPES[Capability.TRANSCRIPTION], options=_HEARING)


def _checked(signature: _Signature) -> Predictor:
    """The predictor `signature` describes, checked against its capability's shape."""
    shape, cap, required = _SHAPES[signature.cap], signature.cap, signature.required
    voice = (
        [p for p in required if _is(signature.marker(p), "openai.audio.speech.voice")] if shape.voiced else []
    )
    count = 2 if shape.voiced else 1
    inputs = [p for p in required if p not in voice]
    marked = (
        [p for p in inputs if _is(signature.marker(p), shape.input_marker)] if shape.input_marker else inputs
    )
    wanted = "two required parameters" if shape.voiced else "one required parameter"
    wrong_count = signature.error(
        f"a {cap} predictor takes exactly {wanted}, {shape.takes}; it has {_names(required)}"
    )
    if len(required) != count:
        raise wrong_count
    if shape.voiced and len(voice) != 1:
        raise signature.error("exactly one required parameter must be annotated `Parameter.AudioVoice`")
    if len(marked) != 1:
        raise wrong_count
    primary = marked[0]
    if not shape.fits(signature.base(primary.name)):
        raise signature.error(
            f"parameter `{primary.name}` must be {shape.must_be}, not {_show(signature.base(primary.name))}"
        )
    returns = signature.returns
    if shape.returns is None and not shape.returns_anything and returns is not None:
        raise signature.error(f"a {cap} predictor returns {shape.returns_text}, not `{returns.denotation}`")
    if shape.returns is not None and (
        returns is None
        or returns.denotation != shape.returns
        or _strip(signature.hints["return"]) is not np.ndarray
    ):
        raise signature.error(f"a {cap} predictor must return {shape.returns_text}")
    options = _options(signature, shape)
    predictor = Predictor(
        signature.fn, signature.name, cap, primary.name, options, voice_param=voice[0].name if voice else None
    )
    return shape.finish(signature, predictor)


def _is_token_prompt(annotation: Any) -> bool:
    """`str | list[int]`: a prompt given as text or as the model's own token ids."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return False
    args = {a for a in typing.get_args(annotation) if a is not type(None)}
    return args == {str, list[int]}


def _options(signature: _Signature, shape: _CapabilityShape) -> dict[str, str]:
    """The optional parameters annotated with an OpenAI argument, by denotation; each one the capability
    takes, once, of the type the table says."""
    options: dict[str, str] = {}
    for p in signature.optional:
        marker = signature.marker(p)
        if marker is None:
            continue  # an unannotated optional parameter keeps its default
        if marker.denotation not in shape.options:
            raise signature.error(
                f"parameter `{p.name}` is annotated `{marker.denotation}`, which a {signature.cap} predictor "
                "cannot receive"
            )
        if marker.denotation in options:
            raise signature.error(
                f"parameters `{options[marker.denotation]}` and `{p.name}` both receive `{marker.denotation}`"
            )
        wanted, base = shape.options[marker.denotation], signature.base(p.name)
        if wanted is not None and base is not None and base is not wanted:
            raise signature.error(f"parameter `{p.name}` must be `{wanted.__name__}`, not {_show(base)}")
        options[marker.denotation] = p.name
    return options


def _is(marker: Parameter | None, denotation: str | None) -> bool:
    return marker is not None and marker.denotation == denotation


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
