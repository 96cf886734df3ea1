"""``TritonConfig``: options of the tritonserver process (its command line: command_line.py)."""

import dataclasses
import logging
import os
import pathlib
import re
import typing
from typing import Any, Dict, List, Mapping, Optional, Union

from ..exceptions import PyTritonValidationError
from .extra_args import extra_flags

__all__ = ["TritonConfig", "ENV_PREFIX"]

logger = logging.getLogger(__name__)

ENV_PREFIX = "PYTRITON_TRITON_CONFIG_"
DEFAULT_HTTP_PORT = 8000
DEFAULT_GRPC_PORT = 8001
DEFAULT_METRICS_PORT = 8002
DEFAULT_SAGEMAKER_PORT = 8080  # tritonserver's defaults
DEFAULT_VERTEX_AI_PORT = 8080
DEFAULT_OPENAI_PORT = 9000  # pytriton_like's OpenAI-compatible endpoint (docs/openai.md)
# Per OpenAI stream, the most bytes generated but not yet sent (openai_max_unread_bytes): thousands of events.
DEFAULT_OPENAI_MAX_UNREAD_BYTES = 1 << 20
# How long the relay polls for the answer it expects before it sleeps (TritonConfig.relay_spin_us):
# off by default, since on a machine whose CPUs are busy polling costs more than it saves
# (bench/README.md).
DEFAULT_RELAY_SPIN_US = 0
# Batches in flight per model instance (TritonConfig.relay_in_flight, bench/README.md).
DEFAULT_RELAY_IN_FLIGHT = 1
MAX_RELAY_IN_FLIGHT = 16
# How long serve() keeps serving, reported not ready, after SIGTERM (TritonConfig.drain_secs,
# docs/deployment.md): long enough for a load balancer checking every second or two and for
# Kubernetes to take the pod out of its endpoints, short enough that the stop after it still fits
# `docker stop`'s 10 s and Kubernetes' 30 s grace periods.
DEFAULT_DRAIN_SECS = 5.0


@dataclasses.dataclass(frozen=True)
class TritonConfig:
    """Options of the tritonserver process; ``None`` leaves Triton's default.

    Every field may also come from an environment variable ``PYTRITON_TRITON_CONFIG_<FIELD>``
    (e.g. ``PYTRITON_TRITON_CONFIG_HTTP_PORT=9000``); a list field takes one item from
    ``..._<FIELD>`` or several from ``..._<FIELD>_0``, ``..._<FIELD>_1``...; a value given to the
    constructor wins over the environment. A variable that names no field is ignored, with one
    warning naming all such variables (as PyTriton does); a bad value of a known field is an error.

    Args:
        id: identifier of the server.
        model_repository: a model repository of hand-written models served next to bound ones: a
            folder, or an ``s3://`` URL (kept as a string; docs/model_management.md).
        log_verbose: verbose logging level (0: off).
        log_file: file that receives the server's log (default: ``triton.log`` in the workspace).
        exit_timeout_secs: how long stopping waits for in-flight requests.
        exit_on_error: exit when initialisation fails.
        strict_readiness: ready only when every model is ready.
        allow_http / http_address / http_port / http_header_forward_pattern / http_thread_count /
        http_restricted_api: the HTTP endpoint (default port 8000).
        allow_grpc / grpc_address / grpc_port / grpc_header_forward_pattern /
        grpc_infer_allocation_pool_size / grpc_use_ssl / grpc_use_ssl_mutual / grpc_server_cert /
        grpc_server_key / grpc_root_cert / grpc_infer_response_compression_level /
        grpc_keepalive_time / grpc_keepalive_timeout / grpc_keepalive_permit_without_calls /
        grpc_http2_max_pings_without_data / grpc_http2_min_recv_ping_interval_without_data /
        grpc_http2_max_ping_strikes / grpc_restricted_protocol: the gRPC endpoint (default port 8001).
        allow_metrics / allow_gpu_metrics / allow_cpu_metrics / metrics_interval_ms / metrics_port /
        metrics_address / metrics_config: the Prometheus metrics endpoint (default port 8002).
        allow_sagemaker / sagemaker_port / sagemaker_safe_port_range / sagemaker_thread_count:
            Triton's Amazon SageMaker endpoint (``/ping``, ``/invocations``; default port 8080).
        allow_vertex_ai / vertex_ai_port / vertex_ai_thread_count / vertex_ai_default_model:
            Triton's Google Vertex AI endpoint (default port 8080; Triton reads the routes from
            ``AIP_PREDICT_ROUTE`` and ``AIP_HEALTH_ROUTE``). See docs/lifecycle_policy.md.
        trace_config: trace settings (``<setting>=<value>``, repeated).
        cache_config: response cache settings, e.g. ``["local,size=1048576"]``.
        cache_directory: folder of cache implementations (default: the Triton install's ``caches``).
        buffer_manager_thread_count: threads that copy tensors.
        shm_limit_bytes: pytriton_like's own setting: the largest shared-memory arena the relay
            uses per model instance and direction; a request or response needing more fails with
            an error naming the size (default: no limit; the arenas are memfds, memory like any
            other, not files in /dev/shm).
        relay_spin_us: pytriton_like's own setting: with one batch in flight per instance, how
            long, in microseconds, the relay's backend polls for the worker's answer before it
            sleeps (default 0: it sleeps at once). It saves the wake-up of a sleeping thread when
            CPUs are idle, and costs CPU when they are not; a model whose answers take longer stops
            spinning by itself, and a model with more instances than half the CPUs never spins.
        relay_in_flight: pytriton_like's own setting: how many batches the relay keeps in flight
            per model instance of a non-decoupled model (default 1, at most 16). With 2 or more the
            backend sends the next batch while the callable runs (it still runs one batch at a
            time), and a thread per instance answers (bench/README.md measures both).
        model_control_mode: how the models of ``model_repository`` are loaded: ``"none"`` (the
            default: all at start), ``"explicit"`` (those in ``load_model`` at start, the others on
            request) or ``"poll"`` (all at start, then the folder is watched). pytriton_like runs
            these over the repository itself; tritonserver always runs in explicit mode (see
            docs/model_management.md).
        repository_poll_secs: in ``"poll"`` mode, seconds between two scans of the repository
            (default 15).
        load_model: in ``"explicit"`` mode, the repository models loaded at start.
        extra_args: tritonserver options this class does not name, as a dict
            (``{"model-load-thread-count": 4, "log-format": "ISO8601"}``; a list value repeats the
            option, ``None`` passes it without a value) or a list of flags
            (``["--model-load-thread-count=4"]``). Options pytriton_like controls (ports,
            addresses, the model-control mode and repositories, backend and cache folders,
            restricted APIs, the log it reads, endpoints it cannot guard) are refused with a
            :class:`PyTritonValidationError` that says what to use instead; so are options a
            field of this class sets (use the field). From the environment:
            ``PYTRITON_TRITON_CONFIG_EXTRA_ARGS=--model-load-thread-count=4`` (one flag) or
            ``..._EXTRA_ARGS_0``, ``..._EXTRA_ARGS_1``... (several).
        drain_secs: pytriton_like's own setting: on SIGTERM, ``serve()`` first makes the server
            report not ready (``/v2/health/ready`` answers 400, gRPC ``ServerReady`` false) and
            keeps serving what comes for this many seconds, then stops as ``stop()`` does (in-flight
            requests finish). Default 5; 0 stops at once. SIGINT and ``stop()`` do not drain;
            a second signal cuts the drain short. Needs ``strict_readiness`` (Triton's default).
            See docs/deployment.md.
        triton_home: pytriton_like's own setting: the Triton install that serves, a folder laid out
            as ``/opt/tritonserver`` in NVIDIA's containers (``bin/tritonserver``, ``lib/``,
            ``backends/``); default: the tritonserver shipped with pytriton_like. Its backends are
            used from where they are (nothing is written into the install) and the relay's backend
            is loaded next to them; a server whose backend API the relay does not support fails to
            start with both versions named. From the environment:
            ``PYTRITON_TRITON_CONFIG_TRITON_HOME=/opt/tritonserver`` (docs/deployment.md).
        allow_openai / openai_address / openai_port / openai_api_key / openai_max_unread_bytes:
            pytriton_like's own OpenAI-compatible HTTP endpoint (``/v1/models``, ``/v1/chat/completions``,
            ``/v1/completions``, ``/v1/embeddings``), off by default; ``allow_openai=True`` serves
            it on port 9000 of every interface (``openai_address`` to choose), from a process of its
            own. Requests go through tritonserver's gRPC endpoint to models bound with
            :mod:`pytriton_like.openai`'s helpers. With ``openai_api_key`` every request needs ``Authorization: Bearer <key>``;
            without one, an endpoint beyond loopback says so at start. A stream whose client reads
            more slowly than the model generates ends with an error event, and its generation
            stops, once ``openai_max_unread_bytes`` (default 1 MiB) wait to be sent. See docs/openai.md.
    """

    model_repository: Optional[Union[pathlib.Path, str]] = None
    id: Optional[str] = None
    log_verbose: Optional[int] = None
    log_file: Optional[pathlib.Path] = None
    exit_timeout_secs: Optional[int] = None
    exit_on_error: Optional[bool] = None
    strict_readiness: Optional[bool] = None
    allow_http: Optional[bool] = None
    http_address: Optional[str] = None
    http_port: Optional[int] = None
    http_header_forward_pattern: Optional[str] = None
    http_thread_count: Optional[int] = None
    http_restricted_api: Optional[str] = None
    allow_grpc: Optional[bool] = None
    grpc_address: Optional[str] = None
    grpc_port: Optional[int] = None
    grpc_header_forward_pattern: Optional[str] = None
    grpc_infer_allocation_pool_size: Optional[int] = None
    grpc_use_ssl: Optional[bool] = None
    grpc_use_ssl_mutual: Optional[bool] = None
    grpc_server_cert: Optional[pathlib.Path] = None
    grpc_server_key: Optional[pathlib.Path] = None
    grpc_root_cert: Optional[pathlib.Path] = None
    grpc_infer_response_compression_level: Optional[str] = None
    grpc_keepalive_time: Optional[int] = None
    grpc_keepalive_timeout: Optional[int] = None
    grpc_keepalive_permit_without_calls: Optional[bool] = None
    grpc_http2_max_pings_without_data: Optional[int] = None
    grpc_http2_min_recv_ping_interval_without_data: Optional[int] = None
    grpc_http2_max_ping_strikes: Optional[int] = None
    grpc_restricted_protocol: Optional[str] = None
    allow_metrics: Optional[bool] = None
    allow_gpu_metrics: Optional[bool] = None
    allow_cpu_metrics: Optional[bool] = None
    metrics_interval_ms: Optional[int] = None
    metrics_port: Optional[int] = None
    metrics_address: Optional[str] = None
    allow_sagemaker: Optional[bool] = None
    sagemaker_port: Optional[int] = None
    sagemaker_safe_port_range: Optional[str] = None
    sagemaker_thread_count: Optional[int] = None
    allow_vertex_ai: Optional[bool] = None
    vertex_ai_port: Optional[int] = None
    vertex_ai_thread_count: Optional[int] = None
    vertex_ai_default_model: Optional[str] = None
    metrics_config: Optional[List[str]] = None
    trace_config: Optional[List[str]] = None
    cache_config: Optional[List[str]] = None
    cache_directory: Optional[pathlib.Path] = None
    buffer_manager_thread_count: Optional[int] = None
    shm_limit_bytes: Optional[int] = None
    relay_spin_us: Optional[int] = None
    relay_in_flight: Optional[int] = None
    model_control_mode: Optional[str] = None
    repository_poll_secs: Optional[float] = None
    load_model: Optional[List[str]] = None
    extra_args: Optional[Union[List[str], Dict[str, Any]]] = None
    drain_secs: Optional[float] = None
    # pytriton_like's own fields, after PyTriton's: theirs keep their positions
    triton_home: Optional[pathlib.Path] = None
    allow_openai: Optional[bool] = None
    openai_address: Optional[str] = None
    openai_port: Optional[int] = None
    openai_api_key: Optional[str] = dataclasses.field(default=None, repr=False)
    openai_max_unread_bytes: Optional[int] = None

    def __post_init__(self):
        if self.allow_http is False and self.allow_grpc is False:
            raise PyTritonValidationError("TritonConfig: allow at least one of the HTTP and gRPC endpoints")
        for field in ("http_port", "grpc_port", "metrics_port", "sagemaker_port", "vertex_ai_port", "openai_port"):
            port = getattr(self, field)
            if port is not None and not 0 < port < 65536:
                raise PyTritonValidationError(f"TritonConfig: {field} must be within 1..65535, got {port}")
        if self.relay_spin_us is not None and self.relay_spin_us < 0:
            raise PyTritonValidationError(f"TritonConfig: relay_spin_us must be 0 or more, got {self.relay_spin_us}")
        if self.relay_in_flight is not None and not 1 <= self.relay_in_flight <= MAX_RELAY_IN_FLIGHT:
            raise PyTritonValidationError(
                f"TritonConfig: relay_in_flight must be within 1..{MAX_RELAY_IN_FLIGHT}, got {self.relay_in_flight}"
            )
        if self.openai_max_unread_bytes is not None and self.openai_max_unread_bytes < 1:
            raise PyTritonValidationError(f"TritonConfig: openai_max_unread_bytes must be 1 or more, got {self.openai_max_unread_bytes}")
        if self.drain_secs is not None and not self.drain_secs >= 0:
            raise PyTritonValidationError(f"TritonConfig: drain_secs must be 0 or more, got {self.drain_secs}")
        if self.allow_openai and (self.allow_grpc is False or self.grpc_use_ssl):
            raise PyTritonValidationError(
                "TritonConfig: allow_openai needs the gRPC endpoint without SSL (the OpenAI endpoint forwards requests"
                " over it, on this machine); leave allow_grpc on and grpc_use_ssl off"
            )
        _check_control_mode(self)
        self.extra_flags()  # refuses what pytriton_like controls, now rather than at run()

    def extra_flags(self) -> List[str]:
        """``extra_args`` as tritonserver flags (``--name=value``), checked.

        Raises:
            PyTritonValidationError: a malformed option, or one pytriton_like controls.
        """
        return extra_flags(self.extra_args, _field_names())

    def relay_spin(self) -> int:
        """``relay_spin_us``, or its default when unset."""
        return DEFAULT_RELAY_SPIN_US if self.relay_spin_us is None else self.relay_spin_us

    def relay_batches_in_flight(self) -> int:
        """``relay_in_flight``, or its default when unset."""
        return DEFAULT_RELAY_IN_FLIGHT if self.relay_in_flight is None else self.relay_in_flight

    def openai_endpoint_port(self) -> Optional[int]:
        """The OpenAI endpoint's port when ``allow_openai`` is on, else None."""
        return (self.openai_port or DEFAULT_OPENAI_PORT) if self.allow_openai else None

    def openai_unread_limit(self) -> int:
        """``openai_max_unread_bytes``, or its default when unset."""
        return DEFAULT_OPENAI_MAX_UNREAD_BYTES if self.openai_max_unread_bytes is None else self.openai_max_unread_bytes

    def drain_time(self) -> float:
        """``drain_secs``, or its default when unset."""
        return DEFAULT_DRAIN_SECS if self.drain_secs is None else self.drain_secs

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> "TritonConfig":
        """A config from a dict of field values, as PyTriton's: strings are converted to the field
        types (``"8000"`` -> 8000, ``"false"`` -> False; a list field takes a list, or one string
        as one item); names that are no field are logged at WARNING and ignored.

        Raises:
            PyTritonValidationError: a value that does not convert to its field's type.
        """
        types = _field_types()
        unknown = [name for name in config if name not in types]
        for name in unknown:
            logger.warning(
                "Ignoring %s=%s as could not find matching config field. Available fields: %s",
                name, config[name], ", ".join(types),
            )
        return cls(**{name: _cast(name, types[name], value) for name, value in config.items() if name in types})

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "TritonConfig":
        """A config from ``PYTRITON_TRITON_CONFIG_*`` variables, values converted to the field types.

        A variable that names no field is logged at WARNING and ignored (as PyTriton does).
        """
        return cls(**_env_values(os.environ if environ is None else environ))

    def with_env(self, environ: Optional[Mapping[str, str]] = None) -> "TritonConfig":
        """This config with the fields it leaves ``None`` taken from the environment."""
        values = _env_values(os.environ if environ is None else environ)
        return dataclasses.replace(self, **{k: v for k, v in values.items() if getattr(self, k) is None})

    def to_dict(self) -> Dict[str, Any]:
        """The fields as a dict."""
        return dataclasses.asdict(self)

    @property
    def ports(self) -> Dict[str, Optional[int]]:
        """The enabled endpoints and their ports."""
        ports = {}
        if self.allow_http is not False:
            ports["HTTP"] = self.http_port or DEFAULT_HTTP_PORT
        if self.allow_grpc is not False:
            ports["gRPC"] = self.grpc_port or DEFAULT_GRPC_PORT
        if self.allow_metrics is not False:
            ports["metrics"] = self.metrics_port or DEFAULT_METRICS_PORT
        if self.allow_sagemaker:
            ports["SageMaker"] = self.sagemaker_port or DEFAULT_SAGEMAKER_PORT
        if self.allow_vertex_ai:
            ports["Vertex AI"] = self.vertex_ai_port or DEFAULT_VERTEX_AI_PORT
        return ports


CONTROL_MODES = ("none", "explicit", "poll")
DEFAULT_POLL_SECS = 15.0


def _check_control_mode(config: TritonConfig) -> None:
    mode = config.model_control_mode
    if mode is not None and mode not in CONTROL_MODES:
        raise PyTritonValidationError(
            f"TritonConfig: model_control_mode must be one of {', '.join(CONTROL_MODES)}, got {mode!r}"
        )
    if config.repository_poll_secs is not None and not config.repository_poll_secs > 0:
        raise PyTritonValidationError(
            f"TritonConfig: repository_poll_secs must be > 0, got {config.repository_poll_secs}"
        )
    if config.load_model and mode != "explicit":
        # As tritonserver's own --load-model: in the other modes every model loads at start.
        raise PyTritonValidationError(
            f"TritonConfig: load_model needs model_control_mode='explicit', got {mode or 'none'!r}"
        )


_LIST_ITEM = re.compile(r"^(.+)_(\d+)$")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _field_types() -> Dict[str, Any]:
    hints = typing.get_type_hints(TritonConfig)
    return {field.name: typing.get_args(hints[field.name])[0] for field in dataclasses.fields(TritonConfig)}


def _env_values(environ: Mapping[str, str]) -> Dict[str, Any]:
    types = _field_types()
    values: Dict[str, Any] = {}
    items: Dict[str, Dict[int, str]] = {}
    unknown = []
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :].lower()
        match = _LIST_ITEM.match(key)
        if key not in types and match and typing.get_origin(types.get(match[1])) is list:
            items.setdefault(match[1], {})[int(match[2])] = text
            continue
        if key not in types:
            unknown.append(name)
            continue
        values[key] = _convert(name, types[key], text)
    if unknown:
        logger.warning(
            "ignoring %s: no TritonConfig field of %s (the fields: %s)",
            ", ".join(sorted(unknown)),
            "that name" if len(unknown) == 1 else "these names",
            ", ".join(types),
        )
    for key, indexed in items.items():
        values[key] = [indexed[index] for index in sorted(indexed)]
    return values


def _cast(name: str, kind: Any, value: Any) -> Any:
    """A from_dict value as its field's type: strings are parsed as the environment's are."""
    if value is None:
        return None
    if isinstance(value, str):
        return _convert(name, kind, value)
    if typing.get_origin(kind) is list:
        return list(value)
    if kind is pathlib.Path:
        return pathlib.Path(value)
    if kind in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return kind(value)
    return value


def _convert(variable: str, kind: Any, text: str) -> Any:
    if kind is pathlib.Path and text.startswith("s3://"):
        return text  # an S3 model repository: a Path would fold its "//"
    if typing.get_origin(kind) is list:
        # One item: Triton's values hold commas themselves ("local,size=1048576").
        return [text]
    if kind is bool:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise PyTritonValidationError(f"{variable}={text!r}: expected true or false")
    try:
        return kind(text)
    except ValueError:
        raise PyTritonValidationError(f"{variable}={text!r}: expected {kind.__name__}") from None


def _field_names() -> set:
    return {field.name for field in dataclasses.fields(TritonConfig)}


