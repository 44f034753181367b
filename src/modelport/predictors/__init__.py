"""The predictor contract: typed functions that serve one OpenAI capability, and the registry of models."""

from modelport.predictors.contract import Capability, Predictor, check_predictor
from modelport.predictors.parameter import Parameter
from modelport.predictors.registry import ModelRegistry

__all__ = ["Capability", "ModelRegistry", "Parameter", "Predictor", "check_predictor"]
