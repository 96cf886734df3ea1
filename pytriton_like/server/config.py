"""``TritonConfig``: options of the tritonserver process (its command line: command_line.py)."""

import dataclasses
import logging
import os
import pathlib
import typing
from typing import Any, Dict, List, Mapping, Optional, Union

from ..exceptions import PyTritonValidationError
from ..supervisor import RestartPolicy
from .config_values import cast, env_values
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
# How far above its memory after its start tritonserver may stay before it is restarted (memory_watch.py).
DEFAULT_SERVER_MEMORY_GROWTH_BYTES = 1 << 30


@dataclasses.dataclass(frozen=True)
class TritonConfig:
    """Options of the tritonserver process; ``None`` leaves Triton's default (docs/configuration.md).

    Every field may also come from an environment variable ``PYTRITON_TRITON_CONFIG_<FIELD>``
    (``..._HTTP_PORT=9000``; a list field from ``..._<FIELD>`` or ``..._<FIELD>_0``, ``_1``...;
    booleans ``true``/``false``, ``1``/``0``, ``yes``/``no``, ``on``/``off``); a value given to the
    constructor wins. A variable naming no field is ignored with a warning; a bad value is an
    error. Frozen: make a changed copy with ``dataclasses.replace``. Fields without a note of
    their own pass to the tritonserver option of the same name (``--grpc-keepalive-time``).

    Args:
        model_repository: hand-written models served next to bound ones: a folder or an ``s3://`` URL.
        id: identifier of the server.
        log_verbose: tritonserver's verbose logging level (0: off).
        log_file: file that receives the server's log (default: ``triton.log`` in the workspace).
        exit_timeout_secs: how long stopping waits for in-flight requests (Triton's default 30).
        exit_on_error: exit when initialisation fails.
        strict_readiness: ready only when every model is ready (Triton's default).
        allow_http: serve the HTTP endpoint (default True).
        http_address: the address the HTTP endpoint listens on (default: every interface).
        http_port: the HTTP endpoint's port (default 8000).
        http_header_forward_pattern: a regex; matching HTTP headers reach the callable as request parameters.
        http_thread_count: threads of the HTTP endpoint.
        http_restricted_api: ``<groups>:<header>=<value>``, only for groups ``Triton(security_config=...)``
            leaves open (restricting one twice is refused; docs/security.md).
        allow_grpc: serve the gRPC endpoint (default True).
        grpc_address: the address the gRPC endpoint listens on (default: every interface).
        grpc_port: the gRPC endpoint's port (default 8001).
        grpc_header_forward_pattern: as ``http_header_forward_pattern``, for gRPC metadata.
        grpc_infer_allocation_pool_size: request/response objects kept for reuse (0: freed after each).
        grpc_use_ssl: serve gRPC over TLS.
        grpc_use_ssl_mutual: require clients' certificates too.
        grpc_server_cert: the server's certificate file.
        grpc_server_key: the server's key file.
        grpc_root_cert: the root certificate client certificates are checked against.
        grpc_infer_response_compression_level: ``none``, ``low``, ``medium`` or ``high``.
        grpc_keepalive_time: keepalive: ms between pings.
        grpc_keepalive_timeout: keepalive: ms to wait for a ping's answer.
        grpc_keepalive_permit_without_calls: keepalive: ping while no call is active.
        grpc_http2_max_pings_without_data: HTTP/2: pings allowed without data.
        grpc_http2_min_recv_ping_interval_without_data: HTTP/2: the least ms between pings.
        grpc_http2_max_ping_strikes: HTTP/2: bad pings before the connection is closed.
        grpc_restricted_protocol: as ``http_restricted_api``, for gRPC.
        allow_metrics: serve the Prometheus metrics endpoint (default True; docs/metrics.md).
        allow_gpu_metrics: report GPU metrics.
        allow_cpu_metrics: report CPU and memory metrics.
        metrics_interval_ms: how often Triton updates its metrics.
        metrics_port: the metrics endpoint's port (default 8002).
        metrics_address: the address the metrics endpoint listens on (default: every interface).
        allow_sagemaker: serve Triton's SageMaker endpoint (``/ping``, ``/invocations``; docs/lifecycle_policy.md).
        sagemaker_port: the SageMaker endpoint's port (default 8080).
        sagemaker_safe_port_range: the port range allowed for endpoints other than SageMaker's.
        sagemaker_thread_count: threads of the SageMaker endpoint.
        allow_vertex_ai: serve Triton's Vertex AI endpoint (routes from ``AIP_PREDICT_ROUTE`` and
            ``AIP_HEALTH_ROUTE``); the server then starts at ``run()`` (docs/lifecycle_policy.md).
        vertex_ai_port: the Vertex AI endpoint's port (default 8080).
        vertex_ai_thread_count: threads of the Vertex AI endpoint.
        vertex_ai_default_model: the model of single-model Vertex AI requests.
        metrics_config: metrics settings, ``<setting>=<value>`` each.
        trace_config: trace settings, ``<setting>=<value>`` each; also the default of
            ``bind(trace_config=...)`` for spans in your process (docs/tracing.md).
        cache_config: the response cache and its size, e.g. ``["local,size=1048576"]``.
        cache_directory: folder of cache implementations (default: the Triton install's ``caches``).
        buffer_manager_thread_count: threads that copy tensors.
        shm_limit_bytes: pytriton_like's own: the largest shared-memory arena of the relay per model
            instance and direction; a request needing more fails naming the size (default: no limit).
        relay_spin_us: pytriton_like's own: µs the relay's backend polls for the answer before it
            sleeps (default 0); a model with more instances than half the CPUs never polls.
        relay_in_flight: pytriton_like's own: batches in flight per instance of a non-decoupled
            model (default 1, at most 16); with more, the next batch is sent while the callable runs.
        model_control_mode: how ``model_repository``'s models load: ``"none"`` (default: all at
            start), ``"explicit"`` (``load_model`` at start) or ``"poll"`` (docs/model_management.md).
        repository_poll_secs: in ``"poll"`` mode, seconds between two scans (default 15).
        load_model: in ``"explicit"`` mode, the repository models loaded at start.
        extra_args: tritonserver options no field names: a dict (``{"log-format": "ISO8601"}``; a
            list value repeats it, ``None`` passes no value) or a list of flags. Options
            pytriton_like controls, or a field sets, are refused, saying what to use instead.
        drain_secs: pytriton_like's own: on SIGTERM, ``serve()`` reports not ready and serves on this
            long before it stops (default 5; 0: at once; docs/deployment.md).
        triton_home: pytriton_like's own: the Triton install that serves, laid out as NVIDIA's
            ``/opt/tritonserver`` (default: the shipped tritonserver; docs/deployment.md).
        allow_openai: pytriton_like's own OpenAI-compatible endpoint, in a process of its own, for
            models bound with ``pytriton_like.openai`` (default off; docs/openai.md).
        openai_address: the address the OpenAI endpoint listens on (default: every interface).
        openai_port: the OpenAI endpoint's port (default 9000).
        openai_api_key: the key each request must send as ``Authorization: Bearer <key>``.
        openai_max_unread_bytes: per OpenAI stream, the most bytes generated but not yet sent to a
            slow client (default 1 MiB); past it the stream ends with an error and its generation stops.
        max_restarts: pytriton_like's own: how many times the run's supervisor starts its children
            again within ``restart_window_secs``, all together: tritonserver (on the same ports
            with the same models), the OpenAI endpoint's process, and the pools of worker
            processes that gave up (default 60; 0: never). A child that had served steadily is
            started again at once, one that dies soon after its start after a back-off. One death
            more, or a child that cannot be started again three times in a row, and ``serve()``
            raises (docs/reliability.md).
        restart_window_secs: the window ``max_restarts`` counts in (default 60).
        server_memory_growth_bytes: pytriton_like's own: when tritonserver's memory stays this
            much above what it held once it started (and after each model load or unload) for a
            minute, the supervisor restarts it: gRPC clients that cancel streams leave memory in
            tritonserver 2.51 until it stops (default 1 GiB; 0: never; docs/reliability.md).

    Raises:
        PyTritonValidationError: a bad port, HTTP and gRPC both off, a setting out of range or in the
            wrong mode, ``allow_openai`` without plain gRPC, an ``extra_args`` option pytriton_like controls.
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
    max_restarts: Optional[int] = None
    restart_window_secs: Optional[float] = None
    openai_max_unread_bytes: Optional[int] = None
    server_memory_growth_bytes: Optional[int] = None

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
        if self.server_memory_growth_bytes is not None and self.server_memory_growth_bytes < 0:
            raise PyTritonValidationError(
                "TritonConfig: server_memory_growth_bytes must be 0 (never) or more,"
                f" got {self.server_memory_growth_bytes}"
            )
        if self.drain_secs is not None and not self.drain_secs >= 0:
            raise PyTritonValidationError(f"TritonConfig: drain_secs must be 0 or more, got {self.drain_secs}")
        if self.allow_openai and (self.allow_grpc is False or self.grpc_use_ssl):
            raise PyTritonValidationError(
                "TritonConfig: allow_openai needs the gRPC endpoint without SSL (the OpenAI endpoint forwards requests"
                " over it, on this machine); leave allow_grpc on and grpc_use_ssl off"
            )
        try:
            object.__setattr__(self, "_restart_policy", RestartPolicy.bounded(self.max_restarts, self.restart_window_secs))
        except PyTritonValidationError as exc:
            raise PyTritonValidationError(f"TritonConfig: {exc}") from None
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

    def restart_policy(self) -> RestartPolicy:
        """How the run's supervisor restarts tritonserver, the OpenAI endpoint's process and the
        pools of worker processes (the bound from ``max_restarts`` and ``restart_window_secs``,
        the rest the policy's defaults)."""
        return self._restart_policy  # type: ignore[attr-defined] # set in __post_init__

    def server_memory_growth(self) -> int:
        """``server_memory_growth_bytes``, or its default when unset."""
        growth = self.server_memory_growth_bytes
        return DEFAULT_SERVER_MEMORY_GROWTH_BYTES if growth is None else growth

    def drain_time(self) -> float:
        """``drain_secs``, or its default when unset."""
        return DEFAULT_DRAIN_SECS if self.drain_secs is None else self.drain_secs

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> "TritonConfig":
        """A config from a dict of field values, as PyTriton's: strings are converted to the field
        types (``"8000"`` -> 8000, ``"false"`` -> False; a list field takes a list, or one string
        as one item); names that are no field are logged at WARNING and ignored.

        Args:
            config: field names and their values.

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
        return cls(**{name: cast(name, types[name], value) for name, value in config.items() if name in types})

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "TritonConfig":
        """A config from ``PYTRITON_TRITON_CONFIG_*`` variables, values converted to the field types.

        A variable that names no field is logged at WARNING and ignored (as PyTriton does).

        Args:
            environ: the variables to read (default: ``os.environ``).
        """
        return cls(**env_values(os.environ if environ is None else environ, ENV_PREFIX, _field_types()))

    def with_env(self, environ: Optional[Mapping[str, str]] = None) -> "TritonConfig":
        """This config with the fields it leaves ``None`` taken from the environment.

        Args:
            environ: the variables to read (default: ``os.environ``).
        """
        values = env_values(os.environ if environ is None else environ, ENV_PREFIX, _field_types())
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


def _field_types() -> Dict[str, Any]:
    hints = typing.get_type_hints(TritonConfig)
    return {field.name: typing.get_args(hints[field.name])[0] for field in dataclasses.fields(TritonConfig)}


def _field_names() -> set:
    return {field.name for field in dataclasses.fields(TritonConfig)}


