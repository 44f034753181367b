"""Typed errors that carry OpenAI's error shape; both faces map them in one place each."""

from __future__ import annotations

import math
from typing import Any


class ModelportError(Exception):
    """An error a caller sees as `{"error": {"message", "type", "param", "code"}}` with `status`."""

    status: int = 500
    type: str = "server_error"
    code: str | None = None
    # Seconds until a retry may get in: sent as `Retry-After` (whole seconds, rounded up) and exactly as
    # `retry-after-ms`, which the openai SDKs prefer: a client told 0.2 s does not wait a whole second.
    retry_after: float | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def body(self) -> dict[str, Any]:
        """The JSON body OpenAI sends for this error."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        """The HTTP headers that go with this error."""
        if self.retry_after is None:
            return {}
        return {
            "Retry-After": str(math.ceil(self.retry_after)),
            "retry-after-ms": str(math.ceil(self.retry_after * 1000)),
        }


class InvalidRequestError(ModelportError):
    """The request is malformed or an argument is out of range."""

    status = 400
    type = "invalid_request_error"


class RouteError(InvalidRequestError):
    """A request for a URL nothing here serves (404), or by a method its endpoint does not take (405): said
    the same way by every face, HTTP's router and the in-process client's table alike."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    @classmethod
    def unknown(cls, method: str, path: str) -> RouteError:
        """`path` whole (`/v1/…`): OpenAI's words for it, then ours."""
        return cls(404, f"Invalid URL ({method.upper()} {path}): modelport does not serve this endpoint.")

    @classmethod
    def wrong_method(cls, method: str, path: str, allowed: str) -> RouteError:
        taken = allowed or "other methods"
        return cls(405, f"Method not allowed ({method.upper()} {path}): this endpoint takes {taken}.")


class ConversationFullError(InvalidRequestError):
    """A conversation holding the most items it may (`[limits] conversation_items`)."""

    def __init__(self, conversation_id: str, held: int, most: int, param: str) -> None:
        super().__init__(
            f"Conversation '{conversation_id}' holds {held} of the {most} items it may hold ([limits] "
            "conversation_items): start another conversation, or delete some of its items.",
            param=param,
            code="conversation_full",
        )


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


class AuthenticationError(ModelportError):
    """No API key, or not one of the configured keys."""

    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": "Bearer"}


class PermissionDeniedError(ModelportError):
    """A valid key that may not do this (a member key on the organization API)."""

    status = 403
    type = "invalid_request_error"
    code = "insufficient_permissions"


class ConflictError(ModelportError):
    """The object would clash with one that exists (a project's name)."""

    status = 409
    type = "invalid_request_error"
    code = "conflict"


class RateLimitError(ModelportError):
    """A project's or a key's requests or tokens per minute are used up until `retry_after` seconds pass;
    `limits` are the `x-ratelimit-*` headers."""

    status = 429
    type = "requests"
    code = "rate_limit_exceeded"

    def __init__(self, message: str, retry_after: float, limits: dict[str, str]) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.limits = limits

    def headers(self) -> dict[str, str]:
        return {**self.limits, **super().headers()}


class PayloadTooLargeError(ModelportError):
    """A request body or an upload exceeds the configured bound."""

    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class RequestTimeoutError(ModelportError):
    """A request whose body paused longer than `[limits] read_seconds`: answered, and its connection closed
    (the SDKs retry a 408)."""

    status = 408
    type = "invalid_request_error"
    code = "request_timeout"

    def headers(self) -> dict[str, str]:
        return {"Connection": "close", **super().headers()}


class OverloadedError(ModelportError):
    """A model's slots are busy and its waiting line is full: come back after `retry_after` seconds."""

    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"

    def __init__(self, model: str, retry_after: int) -> None:
        super().__init__(
            f"The model `{model}` is at capacity: every slot is busy and the queue is full. "
            f"Retry after {retry_after} s.",
        )
        self.retry_after = retry_after


class CapacityError(ModelportError):
    """The server holds as many of something long-lived (WebRTC calls) as it is configured to: come back
    when one has ended."""

    status = 429
    type = "rate_limit_error"
    code = "capacity_exceeded"


class ModelLoadingError(ModelportError):
    """The model is still loading after the configured wait."""

    status = 503
    type = "server_error"
    code = "model_loading"

    def __init__(self, model: str, *, retry_after: int) -> None:
        super().__init__(f"The model `{model}` is still loading. Retry after {retry_after} s.", param="model")
        self.retry_after = retry_after


class ModelTooLargeError(ModelportError):
    """A model needs more memory than the whole budget: no unloading makes room for it, so retrying is
    pointless (`x-should-retry: false` tells the OpenAI SDKs so)."""

    status = 507
    type = "server_error"
    code = "model_too_large"

    def __init__(self, model: str, needs: int, budget: int) -> None:
        super().__init__(
            f"The model `{model}` needs about {needs / 2**30:.2f} GiB, more than the memory budget of "
            f"{budget / 2**30:.2f} GiB (`memory_budget`).",
            param="model",
        )

    def headers(self) -> dict[str, str]:
        return {"x-should-retry": "false"}


class PredictorError(ModelportError):
    """A predictor raised, or returned something its contract forbids."""

    status = 500
    type = "server_error"
    code = "predictor_error"


class ServerError(ModelportError):
    """Something of the server's own failed (not the request, not a model)."""

    status = 500
    type = "server_error"
    code = "server_error"


class PredictorTimeoutError(ModelportError):
    """A predictor call ran past its model's timeout."""

    status = 504
    type = "server_error"
    code = "timeout"


class PredictorContractError(TypeError):
    """A predictor's signature does not satisfy the contract; raised when it is registered."""


class UpstreamError(ModelportError):
    """An upstream answered with something that is not a valid answer (a 5xx, a body that is not JSON, the
    wrong shape, a stream cut short); the message names the upstream."""

    status = 502
    type = "server_error"
    code = "upstream_error"


class UpstreamUnavailableError(ModelportError):
    """No replica of a remote model can take the request now: come back after `retry_after` seconds."""

    status = 503
    type = "server_error"
    code = "upstream_unavailable"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, param="model")
        self.retry_after = retry_after


class UpstreamTimeoutError(ModelportError):
    """No replica of a remote model began to answer within the model's first-byte timeout."""

    status = 504
    type = "server_error"
    code = "upstream_timeout"


class RelayedError(ModelportError):
    """An upstream's own error answer (a 4xx: the request's fault, or a 429), passed on as it came."""

    def __init__(self, status: int, body: dict[str, Any], retry_after: float | None = None) -> None:
        found = body.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else {}
        super().__init__(str(error.get("message") or body))
        self.status = status
        self.type = str(error.get("type") or "invalid_request_error")
        self.code = error.get("code")
        self.param = error.get("param")
        self.retry_after = retry_after
        self._body = body

    def body(self) -> dict[str, Any]:
        return self._body


class NotFoundError(ModelportError):
    """No stored object (completion, response, file, batch) has this id."""

    status = 404
    type = "invalid_request_error"
    code = "not_found"


class StoreDisabledError(InvalidRequestError):
    """Storing is turned off (`--database none`), and the request needs it."""

    code = "store_disabled"


class StoreUnavailableError(ModelportError):
    """The database cannot be reached: nothing is stored, and nothing is said to be."""

    status = 503
    type = "server_error"
    code = "store_unavailable"
    retry_after = 5
