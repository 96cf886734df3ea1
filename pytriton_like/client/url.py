"""Parsing of Triton Inference Server urls (no I/O)."""

import dataclasses
import enum
import urllib.parse

from .exceptions import PyTritonClientInvalidUrlError

__all__ = ["Protocol", "TritonUrl", "DEFAULT_HTTP_PORT", "DEFAULT_GRPC_PORT"]

DEFAULT_HTTP_PORT = 8000
DEFAULT_GRPC_PORT = 8001


class Protocol(enum.Enum):
    """The protocol a client speaks to the server; the value is the url scheme."""

    HTTP = "http"
    GRPC = "grpc"


_DEFAULT_PORTS = {Protocol.HTTP: DEFAULT_HTTP_PORT, Protocol.GRPC: DEFAULT_GRPC_PORT}


@dataclasses.dataclass(frozen=True)
class TritonUrl:
    """A parsed server url: protocol, host and port.

    Attributes:
        protocol: HTTP or gRPC.
        hostname: the host (an IPv6 address without its brackets).
        port: the port.

    Examples:
        >>> TritonUrl.from_url("localhost").with_scheme
        'http://localhost:8000'
        >>> TritonUrl.from_url("grpc://10.0.0.7").without_scheme
        '10.0.0.7:8001'
    """

    protocol: Protocol
    hostname: str
    port: int

    @classmethod
    def from_url(cls, url: str) -> "TritonUrl":
        """Parses ``[scheme://]host[:port]``.

        Without a scheme the url is HTTP; without a port it gets the scheme's default
        (8000 for HTTP, 8001 for gRPC).

        Args:
            url: e.g. ``localhost``, ``localhost:8000``, ``http://host:8000``, ``grpc://host``.

        Returns:
            The parsed url.

        Raises:
            PyTritonClientInvalidUrlError: the url is not a string, has a scheme other
                than ``http``/``grpc``, has no host, a bad port, or a path, query or user.
        """
        if not isinstance(url, str):
            raise PyTritonClientInvalidUrlError(f"Invalid url {url!r}: it must be a string, got {type(url).__name__}: {url!r}")
        text = url.strip()
        if "://" not in text:
            text = f"{Protocol.HTTP.value}://{text}"
        try:
            parts = urllib.parse.urlsplit(text)
            port = parts.port
        except ValueError as exc:
            raise PyTritonClientInvalidUrlError(f"Invalid url {url!r}: {exc}", url=url) from exc

        try:
            protocol = Protocol(parts.scheme.lower())
        except ValueError:
            raise PyTritonClientInvalidUrlError(
                f"Invalid url {url!r}: scheme {parts.scheme!r} is not supported; use http:// or grpc://", url=url
            ) from None
        if not parts.hostname:
            raise PyTritonClientInvalidUrlError(f"Invalid url {url!r}: no host", url=url)
        if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
            raise PyTritonClientInvalidUrlError(
                f"Invalid url {url!r}: expected [scheme://]host[:port] with nothing after the port", url=url
            )
        if port == 0:
            raise PyTritonClientInvalidUrlError(f"Invalid url {url!r}: port 0 cannot be connected to", url=url)
        return cls(protocol=protocol, hostname=parts.hostname, port=port or _DEFAULT_PORTS[protocol])

    @property
    def scheme(self) -> str:
        """``http`` or ``grpc``."""
        return self.protocol.value

    @property
    def without_scheme(self) -> str:
        """``host:port``, the form tritonclient expects (IPv6 hosts in brackets)."""
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return f"{host}:{self.port}"

    @property
    def with_scheme(self) -> str:
        """``scheme://host:port``."""
        return f"{self.scheme}://{self.without_scheme}"

    def __str__(self) -> str:
        return self.with_scheme
