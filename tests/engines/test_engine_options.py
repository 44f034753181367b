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
