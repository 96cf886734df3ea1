"""``TritonRunner``'s calls of the server itself: health, metadata, log and trace settings, shared memory.

A part of :class:`~pytriton_like.runner.runner.TritonRunner` (it inherits :class:`ServerCalls`),
each call sync and ``async_``, as BentoML's Triton runner lists them.
"""

from typing import Any, Dict, List, Optional

__all__ = ["ServerCalls"]


class ServerCalls:
    """The server-wide calls of ``TritonRunner`` (a mixin: it defines ``_server_call`` and ``_async_server_call``)."""

    def _server_call(self, call: str, /, **arguments: Any) -> Any:
        raise NotImplementedError

    async def _async_server_call(self, call: str, /, **arguments: Any) -> Any:
        raise NotImplementedError

    # -- the server: health, metadata, log and trace settings, shared memory --------------------
    # Each through a short-lived client's call_server (client/server_calls.py): the token goes along,
    # and the answers have the HTTP endpoint's shape over both protocols.

    def is_server_live(self) -> bool:
        """Whether the server is live (answers at all)."""
        return self._server_call("is_server_live")

    async def async_is_server_live(self) -> bool:
        """:meth:`is_server_live` as a coroutine."""
        return await self._async_server_call("is_server_live")

    def is_server_ready(self) -> bool:
        """Whether the server is ready (with strict readiness, Triton's default: every model is ready)."""
        return self._server_call("is_server_ready")

    async def async_is_server_ready(self) -> bool:
        """:meth:`is_server_ready` as a coroutine."""
        return await self._async_server_call("is_server_ready")

    def get_server_metadata(self) -> Dict[str, Any]:
        """``{"name", "version", "extensions": [...]}`` of the server."""
        return self._server_call("get_server_metadata")

    async def async_get_server_metadata(self) -> Dict[str, Any]:
        """:meth:`get_server_metadata` as a coroutine."""
        return await self._async_server_call("get_server_metadata")

    def get_model_metadata(self, model_name: str, model_version: Optional[str] = None) -> Dict[str, Any]:
        """``{"name", "versions", "platform", "inputs": [{"name", "datatype", "shape"}...], "outputs": [...]}``
        of a loaded model (version; default: the server's choice).

        Args:
            model_name: the model.
            model_version: its version; ``None``: the server's choice.
        """
        return self._server_call("get_model_metadata", model_name=model_name, model_version=model_version or "")

    async def async_get_model_metadata(self, model_name: str, model_version: Optional[str] = None) -> Dict[str, Any]:
        """:meth:`get_model_metadata` as a coroutine."""
        return await self._async_server_call(
            "get_model_metadata", model_name=model_name, model_version=model_version or ""
        )

    def get_log_settings(self) -> Dict[str, Any]:
        """The server's log settings: ``log_info``, ``log_warning``, ``log_error``, ``log_verbose_level``,
        ``log_format``, ``log_file`` (a restricted call: ``logging``)."""
        return self._server_call("get_log_settings")

    async def async_get_log_settings(self) -> Dict[str, Any]:
        """:meth:`get_log_settings` as a coroutine."""
        return await self._async_server_call("get_log_settings")

    def update_log_settings(self, settings: Dict[str, Any]) -> Dict[str, Any]:
        """Changes log settings (e.g. ``{"log_verbose_level": 1}``); returns them all as they are now.

        Args:
            settings: the settings to change, by name.
        """
        return self._server_call("update_log_settings", settings=settings)

    async def async_update_log_settings(self, settings: Dict[str, Any]) -> Dict[str, Any]:
        """:meth:`update_log_settings` as a coroutine."""
        return await self._async_server_call("update_log_settings", settings=settings)

    def get_trace_settings(self, model_name: Optional[str] = None) -> Dict[str, Any]:
        """The trace settings of the server, or of one model: ``trace_level`` (a list), ``trace_rate``,
        ``trace_count``, ``log_frequency``, ``trace_file``, ``trace_mode`` (a restricted call: ``trace``).

        Args:
            model_name: the model; ``None``: the server's settings.
        """
        return self._server_call("get_trace_settings", model_name=model_name)

    async def async_get_trace_settings(self, model_name: Optional[str] = None) -> Dict[str, Any]:
        """:meth:`get_trace_settings` as a coroutine."""
        return await self._async_server_call("get_trace_settings", model_name=model_name)

    def update_trace_settings(
        self, model_name: Optional[str] = None, settings: Optional[Dict[str, Any]] = None
    ) -> Dict[str, Any]:
        """Changes trace settings of the server or of one model (e.g. ``{"trace_rate": "100"}``); returns them.

        Args:
            model_name: the model; ``None``: the server's settings.
            settings: the settings to change, by name.
        """
        return self._server_call("update_trace_settings", model_name=model_name, settings=settings or {})

    async def async_update_trace_settings(
        self, model_name: Optional[str] = None, settings: Optional[Dict[str, Any]] = None
    ) -> Dict[str, Any]:
        """:meth:`update_trace_settings` as a coroutine."""
        return await self._async_server_call("update_trace_settings", model_name=model_name, settings=settings or {})

    def get_system_shared_memory_status(self, region_name: str = "") -> List[Dict[str, Any]]:
        """The registered system shared-memory regions (or the one named): ``[{"name", "key", "offset",
        "byte_size"}...]`` (a restricted call: ``shared-memory``).

        Args:
            region_name: the region; ``""``: every one.
        """
        return self._server_call("get_system_shared_memory_status", region_name=region_name)

    async def async_get_system_shared_memory_status(self, region_name: str = "") -> List[Dict[str, Any]]:
        """:meth:`get_system_shared_memory_status` as a coroutine."""
        return await self._async_server_call("get_system_shared_memory_status", region_name=region_name)

    def register_system_shared_memory(self, name: str, key: str, byte_size: int, offset: int = 0) -> None:
        """Registers ``byte_size`` bytes at ``offset`` of the POSIX shared memory ``key`` (``/name`` as
        ``shm_open`` takes it) as region ``name``; requests can then pass tensors through it.
        :class:`~pytriton_like.client.ModelClient` ``(use_shared_memory=True)`` does this for you.

        Args:
            name: the region's name, as requests will refer to it.
            key: the POSIX shared-memory key (``/name`` as ``shm_open`` takes it).
            byte_size: the region's size in bytes.
            offset: where the region starts in the shared memory.
        """
        self._server_call("register_system_shared_memory", name=name, key=key, byte_size=byte_size, offset=offset)

    async def async_register_system_shared_memory(self, name: str, key: str, byte_size: int, offset: int = 0) -> None:
        """:meth:`register_system_shared_memory` as a coroutine."""
        await self._async_server_call(
            "register_system_shared_memory", name=name, key=key, byte_size=byte_size, offset=offset
        )

    def unregister_system_shared_memory(self, name: str = "") -> None:
        """Unregisters system shared-memory region ``name`` (every one when ``""``).

        Args:
            name: the region; ``""``: every one.
        """
        self._server_call("unregister_system_shared_memory", name=name)

    async def async_unregister_system_shared_memory(self, name: str = "") -> None:
        """:meth:`unregister_system_shared_memory` as a coroutine."""
        await self._async_server_call("unregister_system_shared_memory", name=name)

    def get_cuda_shared_memory_status(self, region_name: str = "") -> List[Dict[str, Any]]:
        """The registered CUDA shared-memory regions: ``[{"name", "device_id", "byte_size"}...]``.

        Args:
            region_name: the region; ``""``: every one.
        """
        return self._server_call("get_cuda_shared_memory_status", region_name=region_name)

    async def async_get_cuda_shared_memory_status(self, region_name: str = "") -> List[Dict[str, Any]]:
        """:meth:`get_cuda_shared_memory_status` as a coroutine."""
        return await self._async_server_call("get_cuda_shared_memory_status", region_name=region_name)

    def register_cuda_shared_memory(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Registers a CUDA IPC memory handle (``raw_handle``: base64, as ``tritonclient.utils.cuda_shared_memory``
        gives it) of GPU ``device_id`` as region ``name``.

        Args:
            name: the region's name, as requests will refer to it.
            raw_handle: the CUDA IPC memory handle, base64 encoded.
            device_id: the GPU the memory is on.
            byte_size: the region's size in bytes.

        Raises:
            PyTritonClientInferenceServerError: the server cannot use it, e.g. it has no GPU.
        """
        self._server_call(
            "register_cuda_shared_memory", name=name, raw_handle=raw_handle, device_id=device_id, byte_size=byte_size
        )

    async def async_register_cuda_shared_memory(
        self, name: str, raw_handle: bytes, device_id: int, byte_size: int
    ) -> None:
        """:meth:`register_cuda_shared_memory` as a coroutine."""
        await self._async_server_call(
            "register_cuda_shared_memory", name=name, raw_handle=raw_handle, device_id=device_id, byte_size=byte_size
        )

    def unregister_cuda_shared_memory(self, name: str = "") -> None:
        """Unregisters CUDA shared-memory region ``name`` (every one when ``""``).

        Args:
            name: the region; ``""``: every one.
        """
        self._server_call("unregister_cuda_shared_memory", name=name)

    async def async_unregister_cuda_shared_memory(self, name: str = "") -> None:
        """:meth:`unregister_cuda_shared_memory` as a coroutine."""
        await self._async_server_call("unregister_cuda_shared_memory", name=name)
