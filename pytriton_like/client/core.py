"""State and logic every model client shares; the front ends add only I/O.

:class:`ClientCore` knows the url, the model, the timeouts and (once read) the model
configuration; it checks arguments, builds requests, parses results and names errors.
It never talks to the server: :class:`~pytriton_like.client.sync.ModelClient` and
:class:`~pytriton_like.client.aio.AsyncioModelClient` do, each in its own few methods.
"""

import itertools
import logging
import threading
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..access_tokens import is_local_host
from ..model_config.triton_model_config import TritonModelConfig
from ..proxy.types import Request
from .config_parser import parse_model_config
from .arguments import CallArgs
from .error_mapping import translate_stream_error
from .exceptions import (
    PyTritonClientClosedError,
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientValueError,
)
from .inference import (
    InferRequest,
    batches,
    bind_inputs,
    build_request,
    parse_result,
    plan_request,
    verify_flag,
    wire_arrays,
)
from .management import message_to_dict
from .server_core import DEFAULT_INFERENCE_TIMEOUT_S, DEFAULT_INIT_TIMEOUT_S, ServerCore
from .shared_memory import Layout, needed_output_bytes, plan_layout
from .url import Protocol, TritonUrl

__all__ = [
    "ClientCore",
    "CallArgs",
    "DEFAULT_INIT_TIMEOUT_S",
    "DEFAULT_INFERENCE_TIMEOUT_S",
    "streaming_url",
]

_LOGGER = logging.getLogger(__name__)

# Set by Triton on the last response of a request in a gRPC stream.
_FINAL_RESPONSE_PARAMETER = "triton_final_response"


def is_final_response(result: Any) -> bool:
    """Whether a tritonclient.grpc stream result is its request's last (Triton's final-response flag)."""
    flag = result.get_response().parameters.get(_FINAL_RESPONSE_PARAMETER)
    return flag is not None and flag.bool_param


def streaming_url(url: str, client_name: str) -> TritonUrl:
    """Parses the url of a streaming (decoupled) client: it must be gRPC.

    Triton's HTTP ``/infer`` endpoint refuses decoupled models, so the decoupled clients
    speak gRPC only: the sync client says so when it is created, the asyncio one at its
    first request (as PyTriton's do).

    Raises:
        PyTritonClientInvalidUrlError: the url cannot be parsed or is not ``grpc://``
            (a :class:`PyTritonClientValueError`).
    """
    parsed = TritonUrl.from_url(url)
    if parsed.protocol is not Protocol.GRPC:
        raise PyTritonClientInvalidUrlError(
            f"{client_name} streams over gRPC only, got {url!r}; use grpc://host[:port] "
            "(Triton's HTTP endpoint cannot call decoupled models)",
            url=parsed.with_scheme,
        )
    return parsed


class ClientCore(ServerCore):
    """What a model client is, without its connections: a :class:`ServerCore` with a model.

    Args:
        url: server url, ``[http://|grpc://]host[:port]``.
        model_name: the model to talk to.
        model_version: its version (``None``: the latest).
        init_timeout_s: how long to wait for the server and model (default 300 s).
        inference_timeout_s: how long one request may take (default 60 s).
        model_config: the model's configuration, if the caller already knows it.
        access_token: token for Triton's restricted endpoints, sent with every call; ``None``:
            for a server on this host, the token its owner recorded (access_tokens.py), once
            a restricted call needs it.
        use_shared_memory: pass large tensors through system shared memory registered with the
            server (client/shared_memory.py); the server must be on this host.

    Raises:
        PyTritonClientInvalidUrlError: the url cannot be parsed.
        PyTritonClientValueError: a bad model name, version or timeout, or shared memory with a
            server on another host.
    """

    def __init__(
        self,
        url: str,
        model_name: str,
        model_version: Optional[str] = None,
        *,
        init_timeout_s: Optional[float] = None,
        inference_timeout_s: Optional[float] = None,
        model_config: Optional[TritonModelConfig] = None,
        access_token: Optional[str] = None,
        use_shared_memory: bool = False,
    ):
        parsed = TritonUrl.from_url(url)
        if not isinstance(model_name, str) or not model_name:
            raise PyTritonClientValueError(f"model_name must be a non-empty string, got {model_name!r}")
        if model_version is not None:
            if isinstance(model_version, bool) or not isinstance(model_version, (str, int)):
                raise PyTritonClientValueError(f"model_version must be a string or None, got {model_version!r}")
            model_version = str(model_version) or None
        self.model_name = model_name
        self.model_version = model_version
        super().__init__(
            parsed, init_timeout_s=init_timeout_s, inference_timeout_s=inference_timeout_s, access_token=access_token
        )
        if model_config is not None and not isinstance(model_config, TritonModelConfig):
            raise PyTritonClientValueError(
                f"model_config must be a TritonModelConfig, got {type(model_config).__name__}"
            )
        self._model_config = model_config
        self._request_ids = itertools.count(0)  # from 0, as PyTriton's clients
        self._closed = threading.Event()
        self.use_shared_memory = verify_flag("use_shared_memory", use_shared_memory)
        if use_shared_memory and not is_local_host(self.url.hostname):
            raise PyTritonClientValueError(
                f"use_shared_memory needs a server on this host, got {self.url.with_scheme}: "
                "the server maps the client's shared memory"
            )
        # the largest size seen of each output whose shape the config leaves open (shared memory)
        self._output_bytes: Dict[str, int] = {}
        self._output_bytes_lock = threading.Lock()

    def clone_kwargs(self) -> Dict[str, Any]:
        """Constructor arguments of a client like this one, with the model config if known."""
        kwargs: Dict[str, Any] = {
            "url": self.url.with_scheme,
            "model_name": self.model_name,
            "model_version": self.model_version,
            "init_timeout_s": self.init_timeout_s,
            "inference_timeout_s": self.inference_timeout_s,
            "access_token": self._access_token,
        }
        if self.use_shared_memory:
            kwargs["use_shared_memory"] = True
        if self._model_config is not None:
            kwargs.update(model_config=self._model_config, ensure_model_is_ready=False)
        return kwargs

    @property
    def model_config(self) -> Optional[TritonModelConfig]:
        """The model configuration, once known."""
        return self._model_config

    def set_model_config(self, raw_config: Mapping[str, Any]) -> TritonModelConfig:
        """Parses and keeps the server's JSON model config (for gRPC, its ``config`` member)."""
        config = parse_model_config(raw_config, self.model_version)
        _LOGGER.debug("model config of %s at %s: %s", self.model_name, self.url, config)
        self._model_config = config
        return config

    def forget_model_config(self) -> None:
        """Drops the model config, to be read again (after the model was loaded or unloaded)."""
        self._model_config = None

    def shared_layout(self, call: CallArgs, *, by_socket: Sequence[str] = ()) -> Optional[Layout]:
        """Which tensors of a checked call go through shared memory (None: none, or not enabled).

        Inputs of 64 KiB and more do; outputs too when their size is known beforehand: fixed by
        the config, or seen before (not for a sequence's requests: a retry would run the model
        twice, see ``shared_memory_retry``). ``by_socket`` names outputs to leave out.
        """
        if not self.use_shared_memory:
            return None
        config = self._require_config()
        inputs = bind_inputs(config, call.inputs, call.named_inputs)
        batching = batches(config)
        sample = not batching if call.sample is None else call.sample
        arrays = wire_arrays(config, inputs, sample and batching)
        batch = next(iter(arrays.values())).shape[0] if batching and arrays else 1
        known: Dict[str, int] = {}
        for spec in config.outputs:
            if spec.name in by_socket:
                continue
            fixed = _fixed_bytes(spec, batch)
            if fixed is not None:
                known[spec.name] = fixed
            elif not call.sequence:
                with self._output_bytes_lock:
                    seen = self._output_bytes.get(spec.name)
                if seen is not None:
                    known[spec.name] = seen
        layout = plan_layout(arrays, known)
        return layout if layout else None

    def learn_output_sizes(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Remembers the outputs' sizes: the next requests have the server write them to shared memory."""
        with self._output_bytes_lock:
            for name, array in arrays.items():
                if array.dtype.kind not in "OSU":
                    self._output_bytes[name] = max(self._output_bytes.get(name, 0), array.nbytes)

    def shared_memory_retry(self, error: PyTritonClientError, call: CallArgs) -> Optional[str]:
        """The output to send by socket when ``error`` says its region was too small, if the call may be sent again.

        The server fails such a request after the model ran. A request of a sequence is not sent
        again (its state moved on); the size the server needed is remembered either way.
        """
        needed = needed_output_bytes(str(error))
        if needed is None:
            return None
        name, nbytes = needed
        with self._output_bytes_lock:
            self._output_bytes[name] = max(self._output_bytes.get(name, 0), nbytes)
        return None if call.sequence else name

    def prepare(
        self, call: CallArgs, *, decoupled: bool = False, shared: Optional[Tuple[Any, Layout]] = None
    ) -> InferRequest:
        """Builds the request of a checked call; the model config must be known.

        Args:
            call: the checked arguments.
            decoupled: whether the caller is a streaming client (it needs a decoupled model;
                the other clients need a model that is not).

        Raises:
            PyTritonClientInferenceServerError: the model is decoupled and the client is not, or
                the other way round.
            PyTritonClientModelDoesntSupportBatchingError: a batch for a model that does not batch.
            PyTritonClientValueError: inputs that do not fit the model.
        """
        config = self._require_config()
        if config.decoupled and not decoupled:
            raise PyTritonClientInferenceServerError(
                f"model {self.model_name!r} is decoupled (streams responses); "
                "use DecoupledModelClient or AsyncioDecoupledModelClient",
                **self.attributes(),
            )
        if decoupled and not config.decoupled:
            raise PyTritonClientInferenceServerError(
                f"model {self.model_name!r} is not decoupled (one response per request); "
                "use ModelClient, FuturesModelClient or AsyncioModelClient",
                **self.attributes(),
            )
        inputs = bind_inputs(config, call.inputs, call.named_inputs)
        sample = not batches(config) if call.sample is None else call.sample
        return build_request(
            self.protocol,
            config,
            inputs,
            model_name=self.model_name,
            model_version=self.model_version,
            request_id=str(next(self._request_ids)),
            parameters=call.parameters,
            headers={**self._auth_headers, **(call.headers or {})} or None,
            sample=sample,
            shared=shared,
            **call.sequence,
        )

    def relay_request(self, call: CallArgs, parameters: Optional[Dict[str, Any]] = None) -> Tuple[Request, bool, str]:
        """A checked call as a nested call sends it through the relay: the request (its arrays,
        ``parameters``, sequence), whether the result loses a sample's batch axis, and its id.
        The model config must be known.

        Raises:
            PyTritonClientModelDoesntSupportBatchingError: a batch for a model that does not batch.
            PyTritonClientValueError: inputs that do not fit the model.
        """
        config = self._require_config()
        inputs = bind_inputs(config, call.inputs, call.named_inputs)
        sample = not batches(config) if call.sample is None else call.sample
        arrays, strip = plan_request(config, inputs, sample=sample, model_name=self.model_name,
                                     model_version=self.model_version)
        request = Request(arrays, parameters)
        sequence = call.sequence
        if sequence:
            request.sequence_id = sequence.get("sequence_id")
            request.sequence_start = bool(sequence.get("sequence_start"))
            request.sequence_end = bool(sequence.get("sequence_end"))
        return request, strip, str(next(self._request_ids))

    def finish(self, result: Any, request: InferRequest) -> Dict[str, np.ndarray]:
        """The arrays of a result, batch axis stripped for a sample."""
        return parse_result(result, request)

    def stream_request(self, request: InferRequest) -> Dict[str, Any]:
        """The request of a gRPC stream: keyword arguments of tritonclient.grpc's ``async_stream_infer``,
        and the dict tritonclient.grpc.aio's ``stream_infer`` takes from its request iterator.

        Headers are not in it: a gRPC stream takes them once, when it is opened.
        """
        kwargs = request.infer_kwargs()
        del kwargs["headers"]
        return kwargs

    def stream_response(self, result: Any, request: InferRequest) -> Tuple[Optional[Dict[str, np.ndarray]], bool]:
        """One response of a gRPC stream: its arrays and whether it was the request's last.

        Returns:
            ``(arrays, final)``; ``arrays`` is ``None`` for the empty response that only
            marks the end of a request's responses.
        """
        final = is_final_response(result)
        if final and not result.get_response().outputs:
            return None, True
        return parse_result(result, request), final

    def stream_error(self, exc: BaseException, timeout_s: Optional[float] = None) -> PyTritonClientError:
        """The client error for an error a stream delivered, or that ended it; the caller raises it ``from exc``.

        An error of a client closed meanwhile (its streams were cancelled) becomes
        :class:`PyTritonClientClosedError`.
        """
        if self._closed.is_set():
            return PyTritonClientClosedError(
                f"the client of model {self.model_name!r} at {self.url} was closed during streaming inference "
                f"({str(exc) or type(exc).__name__})",
                **self.attributes(),
            )
        return translate_stream_error(exc, self.context("streaming inference", timeout_s))

    # -- model management: tritonclient's arguments and its answers in HTTP's JSON shape ----------

    def model_call(self, timeout_s: float) -> Dict[str, Any]:
        """Arguments of tritonclient's ``is_model_ready``, ``get_model_config`` and
        ``get_inference_statistics`` for this client's model and version (gRPC answers as protobuf)."""
        kwargs: Dict[str, Any] = {"model_name": self.model_name, "model_version": self.model_version or ""}
        kwargs.update(self.control_kwargs(timeout_s))
        return kwargs

    def load_call(self, config: Optional[str], files: Optional[Dict[str, bytes]]) -> Dict[str, Any]:
        """Arguments of tritonclient's ``load_model`` for this model; loading may take ``inference_timeout_s``."""
        kwargs: Dict[str, Any] = {"model_name": self.model_name, "config": config, "files": files}
        kwargs.update(self.control_kwargs(self.inference_timeout_s))
        return kwargs

    def unload_call(self, unload_dependents: bool) -> Dict[str, Any]:
        """Arguments of tritonclient's ``unload_model`` for this client's model (and, with
        ``unload_dependents``, the models Triton loaded for it: an ensemble's composing models).

        Raises:
            PyTritonClientValueError: ``unload_dependents`` is not a bool.
        """
        kwargs: Dict[str, Any] = {
            "model_name": self.model_name,
            "unload_dependents": verify_flag("unload_dependents", unload_dependents),
        }
        kwargs.update(self.control_kwargs(self.inference_timeout_s))
        return kwargs

    def raw_model_config(self, response: Any) -> Dict[str, Any]:
        """The model config dict from ``get_model_config`` (``model_call`` arguments), as HTTP sends it."""
        if self.protocol is Protocol.HTTP:
            return response
        if isinstance(response, dict):  # tritonclient.grpc's as_json=True form (a stand-in may give it)
            return response.get("config", response)
        return message_to_dict(response.config)

    def _require_config(self) -> TritonModelConfig:
        if self._model_config is None:
            raise PyTritonClientError(
                f"the configuration of model {self.model_name!r} is not known yet", **self.attributes()
            )
        return self._model_config

def _fixed_bytes(spec: Any, batch: int) -> Optional[int]:
    """Bytes of an output whose shape the config fixes (no -1) and whose type numpy sizes; else None."""
    if any(dim < 0 for dim in spec.shape) or isinstance(spec.dtype, str):
        return None
    try:
        dtype = np.dtype(spec.dtype)
    except TypeError:
        return None
    if dtype.kind in "OSU":
        return None
    return batch * int(np.prod(spec.shape, dtype=np.int64)) * dtype.itemsize
