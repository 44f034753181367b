"""The predictor contract: typed functions that serve one OpenAI capability, what else they may declare
(`abilities`), relays to models served elsewhere, and the registry and manager of models."""

from modelport.predictors.contract import Capability, Predictor, check_predictor
from modelport.predictors.parameter import Parameter
from modelport.predictors.registry import ModelRegistry
from modelport.predictors.relay import Relay

__all__ = ["Capability", "ModelRegistry", "Parameter", "Predictor", "Relay", "check_predictor"]
