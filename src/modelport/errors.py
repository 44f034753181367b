"""Typed errors that carry OpenAI's error shape; both faces map them in one place each."""

from __future__ import annotations

from typing import Any


class ModelportError(Exception):
    """An error a caller sees as `{"error": {"message", "type", "param", "code"}}` with `status`."""

    status: int = 500
    type: str = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def body(self) -> dict[str, Any]:
        """The JSON body OpenAI sends for this error."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class InvalidRequestError(ModelportError):
    """The request is malformed or an argument is out of range."""

    status = 400
    type = "invalid_request_error"


class ModelNotFoundError(ModelportError):
    """No model, and no alias, has this id."""

    status = 404
    type = "invalid_request_error"
    code = "model_not_found"

    def __init__(self, model: str) -> None:
        super().__init__(
            f"The model `{model}` does not exist or you do not have access to it.", param="model"
        )


class UnsupportedCapabilityError(InvalidRequestError):
    """The model exists but cannot serve this endpoint."""

    code = "unsupported_model_capability"


class PayloadTooLargeError(ModelportError):
    """An upload exceeds the configured bound."""

    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class PredictorError(ModelportError):
    """A predictor raised, or returned something its contract forbids."""

    status = 500
    type = "server_error"
    code = "predictor_error"


class PredictorContractError(TypeError):
    """A predictor's signature does not satisfy the contract; raised when it is registered."""
