"""The lines the operator reads about a run: each endpoint's url, each model ready with its url."""

from typing import Optional, Sequence, Tuple

from ..console import Console
from .command_line import connect_host, endpoint_urls, local_url
from .config import TritonConfig

__all__ = ["ServerLines"]

Ready = Tuple[str, str, Optional[int]]  # (what, name, version) of a model or ensemble loaded


class ServerLines:
    """What ``serve()`` (and a log) says about a run, through its :class:`~pytriton_like.console.Console`.

    Args:
        console: where the lines go.
        config: the server options (endpoints, addresses, ports).
    """

    def __init__(self, console: Console, config: TritonConfig):
        self.console = console
        self._config = config

    def started(self, ready: Sequence[Ready], openai: Optional[Tuple[str, int]] = None, logged: bool = True) -> None:
        """One line per endpoint (its url, and whether it listens on every interface), then one per
        model loaded so far.

        Args:
            ready: the models and ensembles loaded so far.
            openai: the OpenAI endpoint's host and port, when it runs.
            logged: False when the lines were logged already (serve() after run()): only printed.
        """
        config = self._config
        addresses = {"HTTP": config.http_address, "gRPC": config.grpc_address, "metrics": config.metrics_address}
        for endpoint, url in endpoint_urls(config).items():
            self.console.say("%s on %s%s", endpoint, url, _everywhere(addresses[endpoint]), logged=logged)
        if openai is not None:
            host, port = openai
            self.console.say("OpenAI on http://%s:%d/v1%s", connect_host(host), port, _everywhere(host), logged=logged)
        for what, name, version in ready:
            self.ready(what, name, version, logged=logged)

    def ready(self, what: str, name: str, version: Optional[int], logged: bool = True) -> None:
        """The line of a model that is ready, with the url its inference requests go to over HTTP."""
        numbered = f" version {version}" if version is not None else ""
        if "HTTP" in self._config.ports:
            url = f"{local_url(self._config, 'HTTP')}/v2/models/{name}/infer"
            self.console.say("%s %s%s ready: %s", what, name, numbered, url, logged=logged)
        else:
            self.console.say("%s %s%s ready", what, name, numbered, logged=logged)


def _everywhere(address: Optional[str]) -> str:
    return " (listening on all interfaces)" if connect_host(address) != address else ""
