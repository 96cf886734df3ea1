"""``TritonRunner``: every model of a Triton server as an attribute, for services (as BentoML's Triton runner).

Example:
    >>> with TritonRunner("grpc://localhost:8001") as runner:          # doctest: +SKIP
    ...     result = runner.AddSub.run(a, b)
    ...     result.as_numpy("add")
"""

import threading
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Union

import numpy as np

from ..client.aio import AsyncioModelClient
from ..client.exceptions import PyTritonClientClosedError, PyTritonClientValueError
from ..client.server_client import AsyncioServerClient, ServerClient
from ..client.server_core import ServerCore
from ..client.sync import ModelClient
from .model import ModelRunner
from .server_calls import ServerCalls

__all__ = ["TritonRunner"]

class TritonRunner(ServerCalls):
    """One attribute per model of a Triton server: ``runner.my_model.run(x)``, ``await runner.my_model.async_run(x)``,
    and tritonclient's management calls as BentoML's Triton runner lists them, each sync and ``async_``.

    A model is looked up in the server's repository index when first named, so models loaded
    after the runner was made are found. ``runner["name"]`` reaches a model whose name is not a
    Python identifier or is also a method's name; ``dir(runner)`` lists the models.

    Nothing is opened until used. Close the runner with :meth:`close` (or ``with``) when only
    ``run`` was used, with :meth:`async_close` (or ``async with``), in the event loop of the
    ``async_run`` calls, otherwise.

    Args:
        url: server url, ``[http://|grpc://]host[:port]`` (HTTP and port 8000 when not given).
        init_timeout_s: how long ``run`` waits for the server and the model (default 300 s).
        inference_timeout_s: how long one request, or a load or unload, may take (default 60 s);
            the other management calls get the shorter of the two timeouts, as ``ModelClient``'s do.
        access_token: the server's access token, for the restricted calls (load, unload, index,
            statistics, log and trace settings, shared memory); ``None``: for a server of this
            host, the token its owner recorded (docs/security.md).

    Raises:
        PyTritonClientInvalidUrlError: the url cannot be parsed.
        PyTritonClientValueError: a bad timeout.
    """

    def __init__(
        self,
        url: str,
        *,
        init_timeout_s: Optional[float] = None,
        inference_timeout_s: Optional[float] = None,
        access_token: Optional[str] = None,
    ):
        # the url, timeouts and token are checked as every client checks them
        core = ServerCore(url, init_timeout_s=init_timeout_s, inference_timeout_s=inference_timeout_s, access_token=access_token)
        self._access_token = access_token
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
        with self._client() as client:
            if wait and not self._server_seen:
                client.wait_for_server(self._init_timeout_s)
            index = client.get_model_repository_index()
        self._server_seen = True
        names = [entry["name"] for entry in index if entry.get("name")]
        self._known = list(dict.fromkeys(names))
        return self._known

    def _new_model_runner(self, model_name: str) -> ModelRunner:
        return ModelRunner(
            self.url,
            model_name,
            init_timeout_s=self._init_timeout_s,
            inference_timeout_s=self._timeout_s,
            access_token=self._access_token,
        )

    # -- management: each call through a short-lived ModelClient / AsyncioModelClient -------------

    def load_model(self, model_name: str, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None) -> None:
        """Loads (or reloads) a model; the server must run in explicit model-control mode.

        Args:
            model_name: the model (it need not be loaded, nor in the repository when ``config``
                and ``files`` make it).
            config: JSON model configuration to load it with, instead of the repository's.
            files: ``{"file:<path>": content}`` forming the model directory (needs ``config``).

        Raises:
            PyTritonClientInferenceServerError: the server refused or failed to load it.
            PyTritonClientModelUnavailableError: the server cannot be reached.
        """
        with self._client(model_name) as client:
            client.load_model(config, files)
        self._forget(model_name)

    async def async_load_model(
        self, model_name: str, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None
    ) -> None:
        """:meth:`load_model` as a coroutine."""
        async with self._async_client(model_name) as client:
            await client.load_model(config, files)
        self._forget(model_name)

    def unload_model(self, model_name: str, unload_dependents: bool = False) -> None:
        """Unloads a model (and, with ``unload_dependents``, the models Triton loaded for it: an ensemble's steps).

        Args:
            model_name: the model.
            unload_dependents: also unload the models Triton loaded for it.
        
        Raises:
            PyTritonClientInferenceServerError: the server refused to unload it.
            PyTritonClientModelUnavailableError: the server cannot be reached.
        """
        with self._client(model_name) as client:
            client.unload_model(unload_dependents=unload_dependents)
        self._forget(model_name)

    async def async_unload_model(self, model_name: str, unload_dependents: bool = False) -> None:
        """:meth:`unload_model` as a coroutine."""
        async with self._async_client(model_name) as client:
            await client.unload_model(unload_dependents=unload_dependents)
        self._forget(model_name)

    def get_model_repository_index(self) -> List[Dict[str, Any]]:
        """The models of the server's repositories: ``[{"name", "version", "state", "reason"}...]``
        (keys the server leaves empty are left out)."""
        with self._client() as client:
            return client.get_model_repository_index()

    async def async_get_model_repository_index(self) -> List[Dict[str, Any]]:
        """:meth:`get_model_repository_index` as a coroutine."""
        async with self._async_client() as client:
            return await client.get_model_repository_index()

    def is_model_ready(self, model_name: str, model_version: Optional[str] = None) -> bool:
        """Whether the model (version; default: the server's choice) is ready.

        Args:
            model_name: the model.
            model_version: its version; ``None``: the server's choice (the highest ready one).
        """
        with self._client(model_name, model_version) as client:
            return client.is_model_ready()

    async def async_is_model_ready(self, model_name: str, model_version: Optional[str] = None) -> bool:
        """:meth:`is_model_ready` as a coroutine."""
        async with self._async_client(model_name, model_version) as client:
            return await client.is_model_ready()

    def get_model_config(self, model_name: str, model_version: Optional[str] = None) -> Dict[str, Any]:
        """The model's configuration as the server reports it (Triton's JSON form of config.pbtxt).

        Args:
            model_name: the model.
            model_version: its version; ``None``: the server's choice (the highest ready one).
        """
        with self._client(model_name, model_version) as client:
            return client.get_model_config()

    async def async_get_model_config(self, model_name: str, model_version: Optional[str] = None) -> Dict[str, Any]:
        """:meth:`get_model_config` as a coroutine."""
        async with self._async_client(model_name, model_version) as client:
            return await client.get_model_config()

    def get_inference_statistics(
        self, model_name: Optional[str] = None, model_version: Optional[str] = None
    ) -> Dict[str, Any]:
        """Triton's statistics (``{"model_stats": [...]}``) of one model (version), or of all when
        ``model_name`` is None; counts are numbers over HTTP and gRPC alike.

        Args:
            model_name: the model; ``None``: every loaded model.
            model_version: its version; ``None``: every version.

        Raises:
            PyTritonClientValueError: a ``model_version`` without a ``model_name``.
        """
        with self._client(model_name, model_version) as client:
            return client.get_inference_statistics(all_models=model_name is None)

    async def async_get_inference_statistics(
        self, model_name: Optional[str] = None, model_version: Optional[str] = None
    ) -> Dict[str, Any]:
        """:meth:`get_inference_statistics` as a coroutine."""
        async with self._async_client(model_name, model_version) as client:
            return await client.get_inference_statistics(all_models=model_name is None)

    def stream_infer(self, model_name: str, *inputs: np.ndarray, **kwargs: Any) -> Iterator[Dict[str, np.ndarray]]:
        """``runner[model_name].stream_infer(*inputs, **kwargs)``: the responses of a decoupled model (gRPC only).

        Args:
            model_name: the decoupled model.
            *inputs: input arrays in the order of the model's inputs.
            **kwargs: input arrays by name, ``parameters`` and ``headers``, as ``ModelRunner.stream_infer`` takes them.
        """
        return self[model_name].stream_infer(*inputs, **kwargs)

    def async_stream_infer(
        self, model_name: str, *inputs: np.ndarray, **kwargs: Any
    ) -> AsyncIterator[Dict[str, np.ndarray]]:
        """``runner[model_name].async_stream_infer(...)``: an async iterator of the responses (gRPC only).

        Args:
            model_name: the decoupled model.
            *inputs: input arrays in the order of the model's inputs.
            **kwargs: input arrays by name, ``parameters`` and ``headers``, as ``ModelRunner.async_stream_infer`` takes them.
        """
        return self[model_name].async_stream_infer(*inputs, **kwargs)

    def _server_call(self, call: str, /, **arguments: Any) -> Any:
        # a client of the model the call names, if any: its errors name that model
        with self._client(arguments.get("model_name")) as client:
            return client.call_server(call, **arguments)

    async def _async_server_call(self, call: str, /, **arguments: Any) -> Any:
        async with self._async_client(arguments.get("model_name")) as client:
            return await client.call_server(call, **arguments)

    def _client(
        self, model_name: Optional[str] = None, model_version: Optional[str] = None
    ) -> Union[ModelClient, ServerClient]:
        kwargs = self._client_kwargs(model_name, model_version)
        if model_name is None:
            return ServerClient(**kwargs)
        return ModelClient(model_name=model_name, model_version=model_version, **kwargs)

    def _async_client(
        self, model_name: Optional[str] = None, model_version: Optional[str] = None
    ) -> Union[AsyncioModelClient, AsyncioServerClient]:
        kwargs = self._client_kwargs(model_name, model_version)
        if model_name is None:
            return AsyncioServerClient(**kwargs)
        return AsyncioModelClient(model_name=model_name, model_version=model_version, **kwargs)

    def _client_kwargs(self, model_name: Optional[str], model_version: Optional[str]) -> Dict[str, Any]:
        """The arguments of a client for one management call: of ``model_name``, or of the server
        (None: a server-wide call).

        A client of its own, not the model runner's: ``load_model`` may name a model the
        runner does not know yet, and an asyncio client would bind the runner to this call's loop.
        """
        self._check_open()
        if model_name is None and model_version is not None:
            raise PyTritonClientValueError(f"model_version {model_version!r} was given without a model_name")
        return {
            "url": self.url,
            "init_timeout_s": self._init_timeout_s,
            "inference_timeout_s": self._timeout_s,
            "access_token": self._access_token,
        }

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
