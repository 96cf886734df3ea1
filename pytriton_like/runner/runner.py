"""``TritonRunner``: every model of a Triton server as an attribute, for services (as BentoML's Triton runner).

Example:
    >>> with TritonRunner("grpc://localhost:8001") as runner:          # doctest: +SKIP
    ...     result = runner.AddSub.run(a, b)
    ...     result.as_numpy("add")
"""

import threading
from typing import Any, Dict, List, Optional

from ..client.core import ClientCore
from ..client.exceptions import PyTritonClientClosedError
from ..client.sync import ModelClient
from .management import call_async, call_sync, management_call
from .model import ModelRunner

__all__ = ["TritonRunner"]


class TritonRunner:
    """One attribute per model of a Triton server: ``runner.my_model.run(x)``, ``await runner.my_model.async_run(x)``.

    A model is looked up in the server's repository index when first named, so models loaded
    after the runner was made are found. ``runner["name"]`` reaches a model whose name is not a
    Python identifier or is also a method's name; ``dir(runner)`` lists the models.

    Nothing is opened until used. Close the runner with :meth:`close` (or ``with``) when only
    ``run`` was used, with :meth:`async_close` (or ``async with``), in the event loop of the
    ``async_run`` calls, otherwise.

    Args:
        url: server url, ``[http://|grpc://]host[:port]`` (HTTP and port 8000 when not given).
        init_timeout_s: how long ``run`` waits for the server and the model (default 300 s).
        inference_timeout_s: how long one request, or one management call, may take (default 60 s).

    Raises:
        PyTritonClientInvalidUrlError: the url cannot be parsed.
        PyTritonClientValueError: a bad timeout.
    """

    def __init__(self, url: str, *, init_timeout_s: Optional[float] = None, inference_timeout_s: Optional[float] = None):
        # a client core (of a placeholder model) checks the url and timeouts as every client does
        core = ClientCore(url, "-", init_timeout_s=init_timeout_s, inference_timeout_s=inference_timeout_s)
        self._url = core.url
        self._init_timeout_s = core.init_timeout_s
        self._timeout_s = core.inference_timeout_s
        self._models: Dict[str, ModelRunner] = {}
        self._known: List[str] = []  # model names of the last repository index read
        self._server_seen = False  # whether the repository index was read once
        self._lock = threading.Lock()
        self._closed = False

    @property
    def url(self) -> str:
        """The server url with its scheme."""
        return self._url.with_scheme

    # -- models ------------------------------------------------------------------------------

    def __getitem__(self, model_name: str) -> ModelRunner:
        """The runner of model ``model_name``.

        Raises:
            KeyError: the server has no such model; the message lists those it has.
            PyTritonClientTimeoutError: the first lookup waits for the server to be ready, and it
                was not within ``init_timeout_s``.
            PyTritonClientModelUnavailableError: the server cannot be reached to look it up.
        """
        with self._lock:
            self._check_open()
            runner = self._models.get(model_name)
        if runner is not None:
            return runner
        if model_name not in self._known and model_name not in self._refresh():
            available = ", ".join(map(repr, self._known)) or "none"
            raise KeyError(f"the server at {self.url} has no model {model_name!r}; its models: {available}")
        with self._lock:
            self._check_open()
            return self._models.setdefault(model_name, self._new_model_runner(model_name))

    def __getattr__(self, name: str) -> ModelRunner:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(exc.args[0]) from None

    def __dir__(self) -> List[str]:
        try:
            names = self._refresh(wait=False)
        except Exception:  # noqa: BLE001 - dir() must not fail because the server is away
            names = list(self._known)
        return sorted(set(super().__dir__()) | {name for name in names if name.isidentifier()})

    def _refresh(self, wait: bool = True) -> List[str]:
        """Reads the model names from the server's repository index.

        Args:
            wait: until the server was seen once, first wait for it (``init_timeout_s``), as
                ``run`` would: a service may start before its server.
        """
        if wait and not self._server_seen:
            with ModelClient(self.url, "-", init_timeout_s=self._init_timeout_s) as probe:  # the model is not used
                probe.wait_for_server(self._init_timeout_s)
        index = self.get_model_repository_index()
        self._server_seen = True
        names = [entry["name"] for entry in index if entry.get("name")]
        self._known = list(dict.fromkeys(names))
        return self._known

    def _new_model_runner(self, model_name: str) -> ModelRunner:
        return ModelRunner(
            self.url, model_name, init_timeout_s=self._init_timeout_s, inference_timeout_s=self._timeout_s
        )

    # -- management --------------------------------------------------------------------------

    def load_model(self, model_name: str, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None) -> None:
        """Loads (or reloads) a model; the server must run in explicit model-control mode.

        Args:
            model_name: the model.
            config: JSON model configuration to load it with, instead of the repository's.
            files: ``{"file:<path>": content}`` forming the model directory (needs ``config``).

        Raises:
            PyTritonClientInferenceServerError: the server refused or failed to load it.
            PyTritonClientModelUnavailableError: the server cannot be reached.
        """
        self._call("load_model", model_name=model_name, config=config, files=files)
        self._forget(model_name)

    async def async_load_model(
        self, model_name: str, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None
    ) -> None:
        """:meth:`load_model` as a coroutine."""
        await self._async_call("load_model", model_name=model_name, config=config, files=files)
        self._forget(model_name)

    def unload_model(self, model_name: str, unload_dependents: bool = False) -> None:
        """Unloads a model (and, with ``unload_dependents``, the ensembles that use it)."""
        self._call("unload_model", model_name=model_name, unload_dependents=unload_dependents)
        self._forget(model_name)

    async def async_unload_model(self, model_name: str, unload_dependents: bool = False) -> None:
        """:meth:`unload_model` as a coroutine."""
        await self._async_call("unload_model", model_name=model_name, unload_dependents=unload_dependents)
        self._forget(model_name)

    def get_model_repository_index(self) -> List[Dict[str, Any]]:
        """The models of the server's repositories: ``[{"name", "version", "state", "reason"}...]``
        (keys the server leaves empty are left out)."""
        return self._call("get_model_repository_index")

    async def async_get_model_repository_index(self) -> List[Dict[str, Any]]:
        """:meth:`get_model_repository_index` as a coroutine."""
        return await self._async_call("get_model_repository_index")

    def is_model_ready(self, model_name: str, model_version: Optional[str] = None) -> bool:
        """Whether the model (version; default: the server's choice) is ready."""
        return self._call("is_model_ready", model_name=model_name, model_version=model_version)

    async def async_is_model_ready(self, model_name: str, model_version: Optional[str] = None) -> bool:
        """:meth:`is_model_ready` as a coroutine."""
        return await self._async_call("is_model_ready", model_name=model_name, model_version=model_version)

    def get_model_config(self, model_name: str, model_version: Optional[str] = None) -> Dict[str, Any]:
        """The model's configuration as the server reports it (Triton's JSON form of config.pbtxt)."""
        return self._call("get_model_config", model_name=model_name, model_version=model_version)

    async def async_get_model_config(self, model_name: str, model_version: Optional[str] = None) -> Dict[str, Any]:
        """:meth:`get_model_config` as a coroutine."""
        return await self._async_call("get_model_config", model_name=model_name, model_version=model_version)

    def get_inference_statistics(
        self, model_name: Optional[str] = None, model_version: Optional[str] = None
    ) -> Dict[str, Any]:
        """Triton's statistics (``{"model_stats": [...]}``) of one model, or of all when ``model_name`` is None.

        Over gRPC, 64-bit counts come as strings (protobuf's JSON form), over HTTP as numbers.
        """
        return self._call("get_inference_statistics", model_name=model_name, model_version=model_version)

    async def async_get_inference_statistics(
        self, model_name: Optional[str] = None, model_version: Optional[str] = None
    ) -> Dict[str, Any]:
        """:meth:`get_inference_statistics` as a coroutine."""
        return await self._async_call("get_inference_statistics", model_name=model_name, model_version=model_version)

    def _call(self, method: str, **arguments: Any) -> Any:
        self._check_open()
        return call_sync(management_call(self._url.protocol, method, **arguments), self._url, self._timeout_s)

    async def _async_call(self, method: str, **arguments: Any) -> Any:
        self._check_open()
        return await call_async(management_call(self._url.protocol, method, **arguments), self._url, self._timeout_s)

    def _forget(self, model_name: str) -> None:
        """After a load or unload: the model's clients may hold an old config, and the index changed."""
        with self._lock:
            runner = self._models.get(model_name)
            self._known = []
        if runner is not None:
            runner.forget()

    # -- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Closes every model's connections. Idempotent.

        Raises:
            PyTritonClientError: ``async_run`` left connections open in an event loop that is
                running or closed; use :meth:`async_close` in that loop.
        """
        for runner in self._model_runners():
            runner.close()
        self._mark_closed()

    async def async_close(self) -> None:
        """Closes every model's connections, the asyncio ones too; call it in the loop of ``async_run``."""
        for runner in self._model_runners():
            await runner.async_close()
        self._mark_closed()

    def _model_runners(self) -> List[ModelRunner]:
        with self._lock:
            return list(self._models.values())

    def _mark_closed(self) -> None:
        with self._lock:
            self._closed = True
            self._models = {}

    def __enter__(self) -> "TritonRunner":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    async def __aenter__(self) -> "TritonRunner":
        return self

    async def __aexit__(self, *_) -> None:
        await self.async_close()

    def _check_open(self) -> None:
        if self._closed:
            raise PyTritonClientClosedError(f"the runner of {self.url} is closed", url=self.url)

    def __repr__(self) -> str:
        return f"TritonRunner({self.url!r})"
