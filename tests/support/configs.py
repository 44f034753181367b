"""Small configurations tests share: tiny predictors that answer from their input (no model to load)."""

from __future__ import annotations

from modelport.settings import ModelConfig, Settings, StoreSettings

# SmolLM2's end-of-text and end-of-turn tokens banned (`logit_bias`): an answer runs to its `max_tokens`,
# whatever the model would have chosen.
NO_EOS = {"0": -100, "2": -100}

# `reverse` answers with its last message's words reversed; `recall` with the conversation it was given.
TINY = """
defaults = false
[[models]]
id = "reverse"
predictor = "tests.predictors.tiny_models:reverse_chat"
[[models]]
id = "recall"
predictor = "tests.predictors.tiny_models:recall_chat"
"""


def tiny_models(database: str, key: str, **functions: str) -> Settings:
    """Settings serving only tiny predictors (id = a function of `tests.predictors.tiny_models`), storing in
    `database`, behind `key`."""
    models = [ModelConfig(id=i, predictor=f"tests.predictors.tiny_models:{f}") for i, f in functions.items()]
    return Settings(defaults=False, models=models, store=StoreSettings(url=database), api_keys=[key])


def tiny_settings(database: str) -> Settings:
    """`TINY` as settings, storing in `database`."""
    models = [
        ModelConfig(id="reverse", predictor="tests.predictors.tiny_models:reverse_chat"),
        ModelConfig(id="recall", predictor="tests.predictors.tiny_models:recall_chat"),
    ]
    return Settings(defaults=False, models=models, store=StoreSettings(url=database))
