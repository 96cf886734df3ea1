"""gRPC statuses: the codes, the error a call ends with, and the statuses made for answers that
carry none (grpc/grpc doc/statuscodes.md, doc/http-grpc-status-mapping.md, PROTOCOL-HTTP2.md)."""

import enum

from h2.errors import ErrorCodes

__all__ = ["StatusCode", "RpcError", "OK", "CANCELLED", "NOT_FOUND", "INTERNAL", "UNAVAILABLE",
           "HTTP_STATUS_CODES", "RESET_CODES", "is_grpc"]


class StatusCode(enum.IntEnum):
    """The gRPC status codes (grpc/grpc doc/statuscodes.md)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


OK, CANCELLED, NOT_FOUND, INTERNAL, UNAVAILABLE = (
    StatusCode.OK, StatusCode.CANCELLED, StatusCode.NOT_FOUND, StatusCode.INTERNAL, StatusCode.UNAVAILABLE,
)

# The status of an answer without grpc-status, by its HTTP status (doc/http-grpc-status-mapping.md;
# any other, 200 included, is UNKNOWN), and of a call the server reset, by the RST_STREAM error
# code (PROTOCOL-HTTP2.md, "Errors"; any other is INTERNAL).
HTTP_STATUS_CODES = {
    400: StatusCode.INTERNAL, 401: StatusCode.UNAUTHENTICATED, 403: StatusCode.PERMISSION_DENIED,
    404: StatusCode.UNIMPLEMENTED, 429: StatusCode.UNAVAILABLE, 431: StatusCode.INTERNAL,
    502: StatusCode.UNAVAILABLE, 503: StatusCode.UNAVAILABLE, 504: StatusCode.UNAVAILABLE,
}
RESET_CODES = {
    ErrorCodes.REFUSED_STREAM: StatusCode.UNAVAILABLE, ErrorCodes.CANCEL: StatusCode.CANCELLED,
    ErrorCodes.ENHANCE_YOUR_CALM: StatusCode.RESOURCE_EXHAUSTED,
    ErrorCodes.INADEQUATE_SECURITY: StatusCode.PERMISSION_DENIED,
}


class RpcError(Exception):
    """A call ended with a gRPC status other than OK.

    Attributes:
        code: the gRPC status code (a :class:`StatusCode`: ``NOT_FOUND``, ``UNAVAILABLE``...).
        details: the server's message, or what was wrong with its answer.
    """

    def __init__(self, code: int, details: str):
        code = StatusCode(code)
        super().__init__(f"gRPC status {code.name}: {details}")
        self.code = code
        self.details = details


def is_grpc(content_type: bytes) -> bool:
    """``application/grpc``, alone or with ``+`` or ``;`` after it (not ``application/grpc-web``)."""
    return content_type.startswith(b"application/grpc") and content_type[16:17] in (b"", b"+", b";")
