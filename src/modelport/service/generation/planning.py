"""Planning a generation: how many choices each input gets, and which of the request's arguments reach the
predictor, by denotation (tools, response formats and vLLM's guided decoding turned into constraints)."""

from __future__ import annotations

import logging
from typing import Any

from modelport.errors import InvalidRequestError
from modelport.predictors.contract import Predictor
from modelport.protocol.requests import ChatCompletionRequest, CompletionRequest
from modelport.protocol.validation import json_value
from modelport.service.generation import formats, grammar
from modelport.service.generation.formats.effort import ThinkingPlan, foreign
from modelport.service.generation.schema import check_compiles, enforced, json_grammar
from modelport.service.generation.tools import plan as tool_plan

log = logging.getLogger("modelport.service")

TOOLS = "openai.chat.completions.tools"
FORMAT = "openai.chat.completions.response_format"
ALL = "modelport.generation_options"
_OPTION_FIELDS = {
    "openai.chat.completions.temperature": "temperature",
    "openai.chat.completions.top_p": "top_p",
    "openai.chat.completions.presence_penalty": "presence_penalty",
    "openai.chat.completions.frequency_penalty": "frequency_penalty",
    "openai.chat.completions.response_format": "response_format",
    "openai.chat.completions.tools": "tools",
}
# Fields that are the request's framing, not options for the model.
_FRAMING = {
    "model", "messages", "prompt", "stream", "stream_options", "max_completion_tokens", "store", "metadata",
}  # fmt: skip
# Fields modelport honours itself, whatever the predictor.
_HANDLED_HERE = {
    "n", "best_of", "echo", "use_beam_search", "length_penalty", "early_stopping", "json_whitespace",
    "reasoning_effort",
}  # fmt: skip
_TOOL_FIELDS = {"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"}
# vLLM's guided decoding, the one that holds the answer (`_guided`) first where a request gives several.
_GUIDED = ("guided_grammar", "guided_regex", "guided_choice", "guided_json")


def choices_per_input(request: ChatCompletionRequest | CompletionRequest) -> int:
    """How many choices each input gets: `best_of` candidates, or `n`."""
    if request.best_of is not None:
        if request.best_of < request.n:
            raise InvalidRequestError("best_of must be at least n.", param="best_of")
        if request.stream and request.best_of > 1:
            raise InvalidRequestError("best_of cannot be used with stream.", param="best_of")
        return request.best_of
    return request.n


def options(
    predictor: Predictor,
    request: ChatCompletionRequest | CompletionRequest,
    plan: tool_plan.ToolPlan | None = None,
    shown: bool = False,
    thinking: ThinkingPlan | None = None,
) -> tuple[dict[str, Any], formats.Shape]:
    """Map the request onto the predictor's annotated parameters, by denotation; and the shape of its answer
    in the model's own format (the grammar it is held to, already among the options, and its reader).
    `shown`: the template shows the tools itself; `thinking`: what the request lets a model that thinks
    do."""
    sent = request.model_dump(exclude_unset=True, exclude_none=True)
    for name in _HANDLED_HERE:
        sent.pop(name, None)
    if request.best_of is not None and request.best_of > request.n:  # ranking needs token log-probabilities
        sent["logprobs"] = sent.get("logprobs") or (True if isinstance(request, ChatCompletionRequest) else 1)
    if isinstance(request, ChatCompletionRequest) and request.logprobs:
        # llama.cpp reports no token log-probabilities for `top_logprobs: 0`, and 20 alternatives when it is
        # unset: it is asked for at least one, and the answer trimmed to what was asked (`top_logprobs`).
        sent["top_logprobs"] = max(1, request.top_logprobs or 0)
    if isinstance(request, CompletionRequest) and request.logprobs == 0:
        sent["logprobs"] = 1  # the same for the legacy `logprobs: 0`, which still reports each sampled token
    if plan is not None or shown:
        for name in _TOOL_FIELDS:
            sent.pop(name, None)
    compact = request.json_whitespace == "compact"
    form = predictor.chat_format
    held = predictor.accepts(ALL)
    if plan is not None and shown:  # the template shows the tools; the grammar holds the model's own syntax
        sent.pop("response_format", None)
        sent["tools"] = [{"type": "function", "function": tool} for tool in plan.tools]
    guided = next((name for name in _GUIDED if name in sent), None)
    _guided(sent)
    _check_format(sent.get("response_format"))
    # A grammar the request gives (vLLM's guided decoding) is the whole answer's: the model's format is
    # not added around it.
    body = _body(sent.get("response_format")) if plan is None else None
    shape = formats.shape(form, thinking, plan, body, compact, held and "grammar" not in sent)
    if shape.grammar is not None:
        sent.pop("response_format", None)
        sent["grammar"] = shape.grammar
    elif plan is not None and "grammar" not in sent:
        sent["response_format"] = tool_plan.response_format(plan)
    given = request.reasoning_effort if isinstance(request, ChatCompletionRequest) else None
    told = thinking.variables if thinking is not None else foreign(form, given)
    if told:
        sent["chat_template_kwargs"] = {**(sent.get("chat_template_kwargs") or {}), **told}
    if compact and predictor.accepts(ALL) and "grammar" not in sent:
        _held_compact(sent)
    if "grammar" in sent:  # what llama.cpp would decode unconstrained, saying nothing (schemas are checked)
        check_compiles(sent["grammar"], "tools" if plan is not None else guided or "response_format")
    if ("response_format" in sent or "grammar" in sent) and not (
        predictor.accepts(FORMAT) or predictor.accepts(ALL)
    ):
        raise InvalidRequestError(
            f"The model's predictor `{predictor.name}` cannot constrain its output "
            "(structured output, tool calls, guided decoding).",
            param="response_format",
        )
    if "grammar" in sent and not predictor.accepts(ALL):
        raise InvalidRequestError(
            f"The model's predictor `{predictor.name}` takes no grammar.", param="guided_grammar"
        )
    by_denotation: dict[str, Any] = {}
    for denotation, name in _OPTION_FIELDS.items():
        if predictor.accepts(denotation) and name in sent:
            by_denotation[denotation] = sent.pop(name)
    if request.max_output_tokens is not None:
        if predictor.accepts("openai.chat.completions.max_output_tokens"):
            by_denotation["openai.chat.completions.max_output_tokens"] = request.max_output_tokens
        else:
            sent["max_tokens"] = request.max_output_tokens
    rest = {k: v for k, v in sent.items() if k not in _FRAMING}
    if predictor.accepts(ALL):
        by_denotation[ALL] = rest
    elif rest:
        log.info("predictor %s takes no %s; ignored", predictor.name, ", ".join(sorted(rest)))
    return by_denotation, shape


def _body(response_format: dict[str, Any] | None) -> formats.Body | None:
    """The JSON a `response_format` holds the answer to, as the body of a grammar in the model's format."""
    kind = (response_format or {}).get("type")
    if kind == "json_object":
        return lambda g: g.json("output", {"type": "object"})
    spec = (response_format or {}).get("json_schema")
    if kind == "json_schema" and isinstance(spec, dict) and isinstance(spec.get("schema"), dict):
        schema = spec["schema"]
        return lambda g: g.json("output", schema)
    return None


def _guided(sent: dict[str, Any]) -> None:
    """vLLM's guided decoding extras, as a `response_format` or a GBNF `grammar`."""
    if "guided_json" in sent:
        schema = sent.pop("guided_json")
        if isinstance(schema, str):
            try:
                schema = json_value(schema)
            except ValueError:
                raise InvalidRequestError("guided_json is not valid JSON.", param="guided_json") from None
        sent["response_format"] = {"type": "json_schema", "json_schema": {"name": "guided", "schema": schema}}
    if "guided_choice" in sent:
        sent["grammar"] = grammar.choice_grammar(sent.pop("guided_choice"))
    if "guided_regex" in sent:
        sent["grammar"] = grammar.regex_grammar(sent.pop("guided_regex"))
    if "guided_grammar" in sent:
        sent["grammar"] = sent.pop("guided_grammar")


def _held_compact(sent: dict[str, Any]) -> None:
    """A JSON `response_format` as an llguidance grammar that lays the JSON out compactly (llama.cpp's own
    schema grammar lets a model pad it with any whitespace)."""
    response_format = sent.get("response_format") or {}
    if response_format.get("type") == "json_object":
        sent["grammar"] = json_grammar({"type": "object"})
    elif response_format.get("type") == "json_schema" and "schema" in (
        response_format.get("json_schema") or {}
    ):
        sent["grammar"] = json_grammar(response_format["json_schema"]["schema"])
    else:
        return
    del sent["response_format"]


def _check_format(response_format: dict[str, Any] | None) -> None:
    if not response_format or response_format.get("type") != "json_schema":
        return
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise InvalidRequestError("response_format.json_schema must be an object.", param="response_format")
    if "schema" in spec:
        spec["schema"] = enforced(spec["schema"], "response_format.json_schema.schema", "response_format")
