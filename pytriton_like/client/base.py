"""What every client class is apart from its I/O, written once (as httpx's ``BaseClient``).

:class:`BaseClient` is a client of a server: its url and tritonclient module. :class:`BaseModelClient`
adds a model: the constructor's arguments (checked by :class:`~.core.ClientCore`), ``model_name``,
``model_version``, the model config once read, and the checked arguments of a call. The sync
(:mod:`.sync`), asyncio (:mod:`.aio`) and futures (:mod:`.futures`) clients, and the decoupled
ones on them, add only their I/O; the futures client runs on a sync one and shares its core.
"""

from typing import Any, Dict, Optional, Sequence

import numpy as np

from ..model_config.triton_model_config import TritonModelConfig
from .arguments import CallArgs, ParametersT, SequenceIdT
from .connections import CONTROL, INFERENCE, tritonclient_module
from .core import ClientCore
from .server_core import ServerCore

__all__ = ["BaseClient", "BaseModelClient"]


class BaseClient:
    """A client of a Triton server, apart from its I/O (a subclass names its ``_CONNECTIONS``)."""

    _ASYNCIO = False  # which of tritonclient's modules the subclass talks through: asyncio or not
    _CONNECTIONS: Any = None  # the subclass's keeper of tritonclient's clients (connections.py)
    _core: ServerCore
    _connections: Any

    def __init__(
        self,
        url: str,
        *,
        init_timeout_s: Optional[float] = None,
        inference_timeout_s: Optional[float] = None,
        access_token: Optional[str] = None,
    ):
        """A client of the server at ``url`` (arguments as ``ModelClient``'s)."""
        self._core = ServerCore(
            url, init_timeout_s=init_timeout_s, inference_timeout_s=inference_timeout_s, access_token=access_token
        )
        self._connections = self._CONNECTIONS(self._core)

    @property
    def url(self) -> str:
        """The server url with its scheme, e.g. ``http://localhost:8000``."""
        return self._core.url.with_scheme

    def get_lib(self) -> Any:
        """The tritonclient module this client uses: ``tritonclient.http`` or ``tritonclient.grpc``
        (their ``.aio`` modules for an asyncio client), as PyTriton's."""
        return tritonclient_module(self._core.protocol, self._ASYNCIO)

    # PyTriton's names of its two tritonclient clients (code and tests that patch them keep working);
    # here, for a sync client, the calling thread's (HTTP) or the shared (gRPC) connections.
    @property
    def _general_client(self) -> Any:
        return self._connections.get(CONTROL)

    @property
    def _infer_client(self) -> Any:
        return self._connections.get(INFERENCE)


class ModelIdentity:
    """``model_name`` and ``model_version`` of a client of one model (its ``_core``)."""

    _core: ClientCore

    @property
    def model_name(self) -> str:
        """Name of the model."""
        return self._core.model_name

    @property
    def model_version(self) -> Optional[str]:
        """Requested version of the model (``None``: the latest)."""
        return self._core.model_version


class BaseModelClient(ModelIdentity, BaseClient):
    """A client of one model, apart from its I/O.

    Takes the arguments of ``ModelClient`` (see there). A subclass names its ``_SHARED_REGIONS``
    (shared_memory.py) and acts on ``lazy_init`` in ``_init_io`` (at once, or in ``async with``).
    """

    _SHARED_REGIONS: Any = None

    def __init__(
        self,
        url: str,
        model_name: str,
        model_version: Optional[str] = None,
        *,
        lazy_init: bool = True,
        init_timeout_s: Optional[float] = None,
        inference_timeout_s: Optional[float] = None,
        model_config: Optional[TritonModelConfig] = None,
        ensure_model_is_ready: bool = True,
        access_token: Optional[str] = None,
        use_shared_memory: bool = False,
    ):
        self._core = ClientCore(
            url,
            model_name,
            model_version,
            init_timeout_s=init_timeout_s,
            inference_timeout_s=inference_timeout_s,
            model_config=model_config,
            access_token=access_token,
            use_shared_memory=use_shared_memory,
        )
        self._connections = self._CONNECTIONS(self._core)
        release_wait_s = self._core.control_timeout_s()
        self._shared = self._SHARED_REGIONS(self.call_server, release_wait_s) if use_shared_memory else None
        self._lazy_init = lazy_init
        # ready: waited for, and the config read (or given and not to be checked)
        self._ready = model_config is not None and not ensure_model_is_ready
        self._init_io()

    def _init_io(self) -> None:
        """What the subclass's I/O needs once constructed (its locks; a wait for the model unless ``lazy_init``)."""

    @classmethod
    def from_existing_client(cls, existing_client: "BaseModelClient") -> Any:
        """A new client of the same model, url, timeouts and token; it reuses the model config read already.

        The new client has its own connections and is closed separately.

        Args:
            existing_client: the client to copy.
        """
        return cls(**existing_client._core.clone_kwargs())  # noqa: SLF001 - a client of this base

    def _forget_model_config(self) -> None:
        """After a load or unload through this client: the configuration may have changed."""
        self._ready = False
        self._core.forget_model_config()

    @staticmethod
    def _call_args(
        inputs: Sequence[np.ndarray],
        named_inputs: Dict[str, np.ndarray],
        parameters: ParametersT,
        headers: ParametersT,
        sample: bool,
        sequence_id: SequenceIdT,
        sequence_start: bool,
        sequence_end: bool,
    ) -> CallArgs:
        """The checked arguments of an ``infer_sample`` (``sample``) or ``infer_batch`` call."""
        return CallArgs(
            inputs,
            named_inputs,
            parameters,
            headers,
            sample=sample,
            sequence_id=sequence_id,
            sequence_start=sequence_start,
            sequence_end=sequence_end,
        )
