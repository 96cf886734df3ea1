"""The errors of the OpenAI endpoint, as OpenAI's API sends them, and Triton's errors mapped onto them.

Every error is answered with OpenAI's body, ``{"error": {"message", "type", "param", "code"}}``,
and the status code OpenAI's clients map to their error classes (the openai package: 400
``BadRequestError``, 401 ``AuthenticationError``, 404 ``NotFoundError``, 429 ``RateLimitError``,
500 and 503 ``InternalServerError``). In a stream that has begun, the error is one last event
``data: {"error": {...}}`` (the openai package raises ``APIError`` on it).
"""

import logging
from typing import Any, Dict, Optional

__all__ = ["APIError", "bad_request", "not_found_model", "from_triton", "internal_error", "QUEUE_FULL", "TIMED_OUT"]

logger = logging.getLogger(__name__)

# What tritonserver 2.51 says when a request does not get in or waits too long in the queue.
QUEUE_FULL = "Exceeds maximum queue size"
TIMED_OUT = "Request timeout expired"


class APIError(Exception):
    """An error answered to an OpenAI client.

    Attributes:
        status: the HTTP status code.
        type: OpenAI's error type (``invalid_request_error``, ``authentication_error``...).
        param: the request field at fault, or None.
        code: a short machine-readable code, or None.
    """

    def __init__(self, status: int, message: str, type: str, param: Optional[str] = None, code: Optional[str] = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> Dict[str, Any]:
        """OpenAI's error object."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: Optional[str] = None, code: Optional[str] = None) -> APIError:
    """A 400 naming the field at fault."""
    return APIError(400, message, "invalid_request_error", param, code)


def from_triton(model: str, message: str, not_found: bool = False) -> APIError:
    """The error for a request Triton failed with ``message`` (its text, or the gRPC status's details).

    A full queue is 429 and a timeout 503, which clients retry; an unknown model 404; anything else
    is the model's failure: 500 with a message that names the model but none of the server's
    internals (the callable's traceback is in the server's log).
    """
    if QUEUE_FULL in message:
        return APIError(429, f"model {model!r} is busy: its queue is full; retry later", "rate_limit_error", None, "queue_full")
    if TIMED_OUT in message:
        return APIError(
            503, f"model {model!r} did not start the request in time; retry later", "server_error", None, "timeout"
        )
    if not_found or "unknown model" in message:
        return not_found_model(model)
    logger.error("model %s failed a request of the OpenAI endpoint: %s", model, message)
    return APIError(500, f"model {model!r} failed to answer; the server's log says why", "server_error", None, "model_error")


def internal_error(exc: BaseException) -> APIError:
    """The 500 of a failure in the endpoint itself (a bug: logged with its traceback)."""
    logger.error("the OpenAI endpoint failed to answer a request", exc_info=exc)
    return APIError(500, "the endpoint failed to answer; the server's log says why", "server_error", None, "internal_error")


def not_found_model(model: str) -> APIError:
    """The 404 of a model the endpoint does not serve."""
    return APIError(404, f"The model {model!r} does not exist", "invalid_request_error", "model", "model_not_found")
