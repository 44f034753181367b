"""An engine's options are what its factory's parameters say, by name and by type: a third-party engine
given as a bare function is checked as the built-in ones are, and one taking `**options` checks its own."""

from __future__ import annotations

from typing import Any

import pytest

from modelport.engines import Engine


def sized(size: int = 1, name: str | None = None) -> list[Any]:
    return []


def open_ended(**options: Any) -> list[Any]:
    return []


def test_a_factory_s_parameters_are_its_options_by_name_and_type() -> None:
    engine = Engine(sized)
    engine.check_options({"size": 2, "name": "x"}, "m", "mine")
    meant = r"model `m`: the mine engine has no option `sise` \(did you mean `size`\?\); it takes size, name"
    with pytest.raises(ValueError, match=meant):
        engine.check_options({"sise": 2}, "m", "mine")
    with pytest.raises(ValueError, match=r"^model `m`: `size`: Input should be a valid integer$"):
        engine.check_options({"size": "2"}, "m", "mine")  # as TOML gives it: not converted


def test_a_factory_taking_any_options_is_left_to_check_its_own() -> None:
    Engine(open_ended).check_options({"anything": 1}, "m", "open")
    described = Engine(open_ended, takes=sized, withheld=("name",))
    with pytest.raises(ValueError, match="no option `name`; it takes size"):
        described.check_options({"name": "x"}, "m", "open")


def test_a_model_is_described_from_its_file_without_pulling_it() -> None:
    """`Engine.describe` (Ollama's `model_info`) reads a GGUF's header as configured; an `hf://` reference
    not pulled yet says nothing rather than download it (there is no network here to try)."""
    from modelport.engines.assemble import add_engine
    from modelport.engines.llamacpp import default_gguf
    from modelport.predictors.registry import ModelRegistry

    models = ModelRegistry()
    add_engine(models, "here", "llamacpp", path=str(default_gguf()))
    add_engine(models, "far", "llamacpp", path="hf://nobody/nothing-GGUF")
    here, far = models.resolve("here").info, models.resolve("far").info
    assert here is not None
    assert far is not None
    assert here()["llama.context_length"] == 8192
    assert far() == {}


def test_a_template_that_shows_no_tools_is_rendered_as_given_them_without_loading_the_model() -> None:
    """What `modelport models` shows of a model, and what its load renders with, is its template as given the
    tools it does not show (DeepSeek V3.1's, `chat_format.shown_tools`); any other as it comes."""
    from pathlib import Path

    from modelport.engines.llamacpp import chat_format

    real = Path(__file__).parents[1] / "service" / "templates" / "real"
    v31 = (real / "deepseek-v3.1.jinja").read_text()
    template, form = chat_format(chat_template=v31)
    assert (form.calls, "## Tools" in template, "## Tools" in v31) == ("deepseek_v31", True, False)
    glm = (real / "glm-4.7-flash.jinja").read_text()
    assert chat_format(chat_template=glm)[0] == glm


def test_the_llama_cpp_engine_takes_the_pace_of_its_streams_in_milliseconds() -> None:
    """`stream_interval_ms` (how often at most a stream's tokens that come faster are sent together) is one
    of the llama.cpp engine's options, a number of milliseconds, checked when the settings are read."""
    from modelport.engines import engine

    llamacpp = engine("llamacpp")
    llamacpp.check_options({"stream_interval_ms": 0}, "m", "llamacpp")
    llamacpp.check_options({"stream_interval_ms": 12.5}, "m", "llamacpp")
    with pytest.raises(ValueError, match="`stream_interval_ms`: Input should be a valid number"):
        llamacpp.check_options({"stream_interval_ms": "fast"}, "m", "llamacpp")
