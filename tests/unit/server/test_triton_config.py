"""TritonConfig: environment variables, validation, ports, and the tritonserver command line."""

import dataclasses
import logging
import pathlib
import re

import pytest

from pytriton_like.exceptions import PyTritonValidationError
from pytriton_like.server.command_line import server_argv
from pytriton_like.supervisor import RestartPolicy
from pytriton_like.server.config import ENV_PREFIX, TritonConfig

# Every option `tritonserver --help` of the bundled tritonserver 2.51.0 lists.
TRITONSERVER_FLAGS = frozenset(
    """
    allow-cpu-metrics allow-gpu-metrics allow-grpc allow-http allow-metrics allow-sagemaker allow-vertex-ai
    backend-config backend-directory buffer-manager-thread-count cache-config cache-directory
    cuda-memory-pool-byte-size cuda-virtual-address-size disable-auto-complete-config enable-peer-access
    exit-on-error exit-timeout-secs grpc-address grpc-header-forward-pattern grpc-http
    grpc-http2-max-pings-without-data grpc-http2-min-recv-ping-interval-without-data grpc-http2-max-ping-strikes
    grpc-infer-allocation-pool-size grpc-infer-response-compression-level grpc-keepalive-permit-without-calls
    grpc-keepalive-time grpc-keepalive-timeout grpc-max-connection-age grpc-max-connection-age-grace grpc-port
    grpc-restricted-protocol grpc-root-cert grpc-server-cert grpc-server-key grpc-use-ssl grpc-use-ssl-mutual
    help host-policy http-address http-header-forward-pattern http-port http-restricted-api http-thread-count id
    load-model log-error log-file log-format log-info log-verbose log-warning metrics-address metrics-config
    metrics-interval-ms metrics-port min-supported-compute-capability model-config-name model-control-mode
    model-load-gpu-limit model-load-retry-count model-load-thread-count model-namespacing model-repository
    model-store pinned-memory-pool pinned-memory-pool-byte-size rate-limit rate-limit-resource
    repoagent-directory repository-poll-secs response-cache-byte-size reuse-grpc-port reuse-http-port
    sagemaker-port sagemaker-safe-port-range sagemaker-thread-count strict-model-config strict-readiness
    trace-config trace-count trace-file trace-level trace-log-frequency trace-rate vertex-ai-default-model
    vertex-ai-port vertex-ai-thread-count
    """.split()
)

BINARY = pathlib.Path("/nonexistent/bin/tritonserver")
BACKENDS = pathlib.Path("/nonexistent/backends")
CACHES = pathlib.Path("/nonexistent/caches")


def env(**values) -> dict:
    return {ENV_PREFIX + name.upper(): value for name, value in values.items()}


def argv(config: TritonConfig, repositories=(pathlib.Path("/nonexistent/repo"),), startup=()) -> list:
    return server_argv(
        config,
        binary=BINARY,
        model_repositories=list(repositories),
        backend_directory=BACKENDS,
        cache_directory=CACHES,
        startup_models=list(startup),
    )


def flags(args: list) -> list:
    """The (flag, value) pairs after the binary, in order."""
    pairs = []
    for arg in args[1:]:
        assert arg.startswith("--") and "=" in arg, arg
        flag, value = arg[2:].split("=", 1)
        pairs.append((flag, value))
    return pairs


def values_of(args: list, flag: str) -> list:
    return [value for name, value in flags(args) if name == flag]


# -- from_env ----------------------------------------------------------------------------------


def test_from_env_empty_is_default():
    assert TritonConfig.from_env({}) == TritonConfig()
    assert TritonConfig.from_env({"HTTP_PORT": "1", "PATH": "/bin"}) == TritonConfig()


def test_from_env_converts_to_field_types():
    config = TritonConfig.from_env(
        env(
            id="srv",
            http_port="9000",
            log_verbose="3",
            grpc_address="127.0.0.1",
            log_file="/tmp/x.log",
            model_repository="/models",
            grpc_server_cert="/certs/a.pem",
        )
    )
    assert config.id == "srv"
    assert config.http_port == 9000 and type(config.http_port) is int
    assert config.log_verbose == 3
    assert config.grpc_address == "127.0.0.1"
    assert config.log_file == pathlib.Path("/tmp/x.log") and isinstance(config.log_file, pathlib.Path)
    assert config.model_repository == pathlib.Path("/models")
    assert config.grpc_server_cert == pathlib.Path("/certs/a.pem")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("True", True), ("1", True), ("yes", True), ("on", True),
     ("false", False), ("FALSE", False), ("0", False), ("no", False), ("off", False)],
)
def test_from_env_booleans(text, expected):
    config = TritonConfig.from_env(env(strict_readiness=text, exit_on_error=text))
    assert config.strict_readiness is expected
    assert config.exit_on_error is expected


def test_from_env_bad_boolean():
    message = r"PYTRITON_TRITON_CONFIG_ALLOW_GRPC='maybe': expected true or false"
    with pytest.raises(PyTritonValidationError, match=message):
        TritonConfig.from_env(env(allow_grpc="maybe"))


@pytest.mark.parametrize("text", ["abc", "", "1.5", "80 80"])
def test_from_env_bad_int(text):
    with pytest.raises(PyTritonValidationError, match=rf"PYTRITON_TRITON_CONFIG_HTTP_PORT={text!r}: expected int"):
        TritonConfig.from_env(env(http_port=text))


def test_from_env_unknown_variables_are_ignored_with_one_warning_naming_them(caplog):
    # PyTriton's own docs show PYTRITON_TRITON_CONFIG_LOG_VERBOSITY, which names no field of its
    # TritonConfig either: PyTriton ignores it with a warning, and so do we.
    with caplog.at_level(logging.WARNING, logger="pytriton_like.server.config"):
        config = TritonConfig.from_env(env(log_verbosity="4", no_such_field="1", grpc_port="9001"))
    assert config == TritonConfig(grpc_port=9001)
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert message.startswith(
        "ignoring PYTRITON_TRITON_CONFIG_LOG_VERBOSITY, PYTRITON_TRITON_CONFIG_NO_SUCH_FIELD: no TritonConfig field"
    )
    assert "log_verbose" in message  # the fields it has, to spot the typo


def test_from_env_a_known_variable_with_a_bad_value_is_still_an_error(caplog):
    with pytest.raises(PyTritonValidationError, match=r"PYTRITON_TRITON_CONFIG_LOG_VERBOSE='four': expected int"):
        TritonConfig.from_env(env(log_verbose="four", log_verbosity="4"))


def test_from_env_indexed_form_of_a_scalar_field_is_unknown(caplog):
    with caplog.at_level(logging.WARNING, logger="pytriton_like.server.config"):
        assert TritonConfig.from_env(env(http_port_0="9000")) == TritonConfig()
    assert "ignoring PYTRITON_TRITON_CONFIG_HTTP_PORT_0" in caplog.text


def test_from_dict_converts_as_pytriton_and_ignores_unknown_names(caplog):
    config = TritonConfig.from_dict(
        {"http_port": "9000", "allow_grpc": "false", "log_verbose": 1, "cache_config": "local,size=1048576",
         "trace_config": ["rate=1", "level=TIMESTAMPS"], "model_repository": "/tmp/models", "bogus": 1}
    )
    assert config == TritonConfig(
        http_port=9000, allow_grpc=False, log_verbose=1, cache_config=["local,size=1048576"],
        trace_config=["rate=1", "level=TIMESTAMPS"], model_repository=pathlib.Path("/tmp/models"),
    )
    assert "Ignoring bogus=1 as could not find matching config field" in caplog.text
    with pytest.raises(PyTritonValidationError, match="expected int"):
        TritonConfig.from_dict({"grpc_port": "x"})


def test_from_env_plain_list_variable_is_one_item_commas_kept():
    # Triton's own values hold commas ("local,size=1048576"); several items use the _0, _1 form.
    config = TritonConfig.from_env(env(trace_config="rate=100,level=TIMESTAMPS", metrics_config="a=1"))
    assert config.trace_config == ["rate=100,level=TIMESTAMPS"]
    assert config.metrics_config == ["a=1"]


def test_from_env_list_indexed_form_sorted_by_number():
    config = TritonConfig.from_env(
        env(cache_config_10="c", cache_config_2="b", cache_config_0="local,size=1048576")
    )
    # Each indexed variable is one item, commas included; order is numeric, not lexical.
    assert config.cache_config == ["local,size=1048576", "b", "c"]


def test_from_env_documented_cache_config_reaches_the_server_whole():
    config = TritonConfig.from_env(env(cache_config="local,size=1048576"))
    assert values_of(argv(config), "cache-config") == ["local,size=1048576"]


def test_from_env_validates():
    with pytest.raises(PyTritonValidationError, match=r"http_port must be within 1..65535, got 0"):
        TritonConfig.from_env(env(http_port="0"))
    with pytest.raises(PyTritonValidationError, match=r"allow at least one of the HTTP and gRPC endpoints"):
        TritonConfig.from_env(env(allow_http="false", allow_grpc="0"))


def test_from_env_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv(ENV_PREFIX + "GRPC_PORT", "9101")
    monkeypatch.setenv(ENV_PREFIX + "METRICS_CONFIG_0", "x=1")
    config = TritonConfig.from_env()
    assert config.grpc_port == 9101
    assert config.metrics_config == ["x=1"]


# -- with_env ----------------------------------------------------------------------------------


def test_with_env_constructor_wins_environment_fills_the_rest():
    base = TritonConfig(http_port=7000, allow_metrics=False, trace_config=["rate=1"])
    merged = base.with_env(env(http_port="9000", grpc_port="9001", allow_metrics="true", trace_config="rate=2",
                               log_verbose="1"))
    assert merged.http_port == 7000
    assert merged.allow_metrics is False
    assert merged.trace_config == ["rate=1"]
    assert merged.grpc_port == 9001
    assert merged.log_verbose == 1
    assert base.grpc_port is None  # the original is untouched


def test_with_env_empty_environment_is_identity():
    base = TritonConfig(http_port=7000)
    assert base.with_env({}) == base


def test_with_env_still_validates_the_result():
    with pytest.raises(PyTritonValidationError, match=r"allow at least one"):
        TritonConfig(allow_http=False).with_env(env(allow_grpc="false"))
    assert TritonConfig().with_env(env(bogus="1")) == TritonConfig()  # ignored, with a warning


# -- validation and ports ----------------------------------------------------------------------


@pytest.mark.parametrize("field", ["http_port", "grpc_port", "metrics_port"])
@pytest.mark.parametrize("port", [0, -1, 65536, 100000])
def test_port_out_of_range(field, port):
    with pytest.raises(PyTritonValidationError, match=rf"TritonConfig: {field} must be within 1..65535, got {port}"):
        TritonConfig(**{field: port})


@pytest.mark.parametrize("port", [1, 65535])
def test_port_bounds_accepted(port):
    assert TritonConfig(http_port=port, grpc_port=port, metrics_port=port).http_port == port


def test_relay_in_flight_defaults_to_one_and_is_bounded():
    assert TritonConfig().relay_batches_in_flight() == 1
    assert TritonConfig(relay_in_flight=2).relay_batches_in_flight() == 2
    assert TritonConfig.from_env(env(relay_in_flight="3")).relay_batches_in_flight() == 3
    for bad in (0, 17):
        with pytest.raises(PyTritonValidationError, match=r"relay_in_flight must be within 1..16"):
            TritonConfig(relay_in_flight=bad)


def test_drain_defaults_to_5_s_and_takes_zero_and_the_environment():
    assert TritonConfig().drain_time() == 5.0
    assert TritonConfig(drain_secs=0).drain_time() == 0
    assert TritonConfig.from_env(env(drain_secs="12.5")).drain_time() == 12.5
    assert not any("drain" in arg for arg in argv(TritonConfig(drain_secs=3), startup=["m"]))
    with pytest.raises(PyTritonValidationError, match=r"drain_secs must be 0 or more, got -1"):
        TritonConfig(drain_secs=-1)


def test_relay_spin_defaults_to_off_and_takes_a_value_and_the_environment():
    assert TritonConfig().relay_spin() == 0
    assert TritonConfig(relay_spin_us=0).relay_spin() == 0
    assert TritonConfig.from_env(env(relay_spin_us="120")).relay_spin() == 120
    with pytest.raises(PyTritonValidationError, match=r"relay_spin_us must be 0 or more, got -1"):
        TritonConfig(relay_spin_us=-1)


def test_both_endpoints_disabled():
    message = r"TritonConfig: allow at least one of the HTTP and gRPC endpoints"
    with pytest.raises(PyTritonValidationError, match=message):
        TritonConfig(allow_http=False, allow_grpc=False)
    assert TritonConfig(allow_http=False).allow_grpc is None
    assert TritonConfig(allow_grpc=False).allow_http is None


def test_config_is_frozen_and_to_dict():
    config = TritonConfig(http_port=9000)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.http_port = 1
    as_dict = config.to_dict()
    assert as_dict["http_port"] == 9000
    assert set(as_dict) == {field.name for field in dataclasses.fields(TritonConfig)}


def test_ports_defaults():
    assert TritonConfig().ports == {"HTTP": 8000, "gRPC": 8001, "metrics": 8002}


def test_ports_given_and_disabled():
    assert TritonConfig(http_port=1, grpc_port=2, metrics_port=3).ports == {"HTTP": 1, "gRPC": 2, "metrics": 3}
    assert TritonConfig(allow_http=False, allow_metrics=False, http_port=5).ports == {"gRPC": 8001}
    assert TritonConfig(allow_grpc=False).ports == {"HTTP": 8000, "metrics": 8002}


# -- server_argv -------------------------------------------------------------------------------


def test_argv_head_repositories_control_mode_and_startup_models():
    repos = [pathlib.Path("/r/one"), pathlib.Path("/r/two")]
    args = argv(TritonConfig(), repositories=repos, startup=["A", "b-2"])
    assert args[0] == str(BINARY)
    assert args[1:7] == [
        "--model-repository=/r/one",
        "--model-repository=/r/two",
        f"--backend-directory={BACKENDS}",
        f"--cache-directory={CACHES}",
        "--model-control-mode=explicit",
        "--backend-config=pytriton_like,server-restarts=0",
    ]
    assert values_of(args, "load-model") == ["A", "b-2"]
    assert values_of(args, "model-control-mode") == ["explicit"]


def test_argv_tells_the_relay_backend_how_often_the_server_was_restarted():
    args = server_argv(
        TritonConfig(), binary=BINARY, model_repositories=[], backend_directory=BACKENDS, cache_directory=CACHES,
        startup_models=[], restarts=3,
    )
    assert values_of(args, "backend-config") == ["pytriton_like,server-restarts=3"]


def test_restart_policy_defaults_fields_and_environment():
    assert TritonConfig().restart_policy() == RestartPolicy()  # the policy's own defaults, said there only
    assert TritonConfig(max_restarts=0, restart_window_secs=5).restart_policy() == RestartPolicy(0, 5.0)
    config = TritonConfig.from_env(env(max_restarts="3", restart_window_secs="120"))
    assert config.restart_policy() == RestartPolicy(max_restarts=3, window_s=120.0)
    assert "--max-restarts" not in " ".join(argv(config))
    for fields in ({"max_restarts": -1}, {"restart_window_secs": 0}):
        with pytest.raises(PyTritonValidationError, match=r"^TritonConfig: "):
            TritonConfig(**fields)


def test_argv_default_config():
    args = argv(TritonConfig())
    assert dict(flags(args)) == {
        "model-repository": "/nonexistent/repo",
        "backend-directory": str(BACKENDS),
        "cache-directory": str(CACHES),
        "backend-config": "pytriton_like,server-restarts=0",
        "model-control-mode": "explicit",
        "http-port": "8000",
        "grpc-port": "8001",
        "metrics-port": "8002",
    }
    assert len(args) == 9
    assert values_of(args, "load-model") == []


def test_argv_ports_of_disabled_endpoints_left_out():
    args = argv(TritonConfig(allow_http=False, allow_metrics=False, grpc_port=9001))
    pairs = dict(flags(args))
    assert pairs["allow-http"] == "false"
    assert pairs["allow-metrics"] == "false"
    assert pairs["grpc-port"] == "9001"
    assert "http-port" not in pairs and "metrics-port" not in pairs


def test_argv_booleans_rendered_true_false():
    config = TritonConfig(strict_readiness=True, exit_on_error=False, grpc_use_ssl=True, allow_gpu_metrics=False)
    pairs = dict(flags(argv(config)))
    assert pairs["strict-readiness"] == "true"
    assert pairs["exit-on-error"] == "false"
    assert pairs["grpc-use-ssl"] == "true"
    assert pairs["allow-gpu-metrics"] == "false"


def test_argv_list_fields_repeated():
    config = TritonConfig(
        cache_config=["local,size=1048576"], trace_config=["rate=1", "level=TIMESTAMPS"], metrics_config=["a=1", "b=2"]
    )
    args = argv(config)
    assert values_of(args, "cache-config") == ["local,size=1048576"]
    assert values_of(args, "trace-config") == ["rate=1", "level=TIMESTAMPS"]
    assert values_of(args, "metrics-config") == ["a=1", "b=2"]


def test_argv_scalar_values_and_zero_kept():
    config = TritonConfig(id="srv", log_verbose=0, http_thread_count=4, grpc_address="0.0.0.0",
                          grpc_server_cert=pathlib.Path("/c/cert.pem"), grpc_infer_response_compression_level="high")
    pairs = dict(flags(argv(config)))
    assert pairs["id"] == "srv"
    assert pairs["log-verbose"] == "0"
    assert pairs["http-thread-count"] == "4"
    assert pairs["grpc-address"] == "0.0.0.0"
    assert pairs["grpc-server-cert"] == "/c/cert.pem"
    assert pairs["grpc-infer-response-compression-level"] == "high"


def test_argv_cache_directory_from_config_wins():
    args = argv(TritonConfig(cache_directory=pathlib.Path("/my/caches")))
    assert values_of(args, "cache-directory") == ["/my/caches"]


def test_argv_leaves_files_to_the_caller():
    # The log goes through the process wrapper; the extra repository is passed in model_repositories.
    config = TritonConfig(log_file=pathlib.Path("/tmp/t.log"), model_repository=pathlib.Path("/extra"))
    args = argv(config)
    assert values_of(args, "log-file") == []
    assert values_of(args, "model-repository") == ["/nonexistent/repo"]


def test_argv_every_flag_is_a_tritonserver_option():
    every_field = TritonConfig(
        id="x", log_verbose=1, exit_timeout_secs=3, exit_on_error=True, strict_readiness=True,
        allow_http=True, http_address="0.0.0.0", http_port=1, http_header_forward_pattern="x-.*",
        http_thread_count=2, http_restricted_api="model-repository:k=v",
        allow_grpc=True, grpc_address="0.0.0.0", grpc_port=2, grpc_header_forward_pattern="x-.*",
        grpc_infer_allocation_pool_size=8, grpc_use_ssl=False, grpc_use_ssl_mutual=False,
        grpc_server_cert=pathlib.Path("/a"), grpc_server_key=pathlib.Path("/b"), grpc_root_cert=pathlib.Path("/c"),
        grpc_infer_response_compression_level="none", grpc_keepalive_time=1, grpc_keepalive_timeout=1,
        grpc_keepalive_permit_without_calls=True, grpc_restricted_protocol="health:k=v",
        grpc_http2_max_pings_without_data=1, grpc_http2_min_recv_ping_interval_without_data=1,
        grpc_http2_max_ping_strikes=1, allow_sagemaker=True, sagemaker_port=4, sagemaker_safe_port_range="1-9",
        sagemaker_thread_count=1, allow_vertex_ai=True, vertex_ai_port=5, vertex_ai_thread_count=1,
        vertex_ai_default_model="m",
        allow_metrics=True, allow_gpu_metrics=False, allow_cpu_metrics=True, metrics_interval_ms=10,
        metrics_port=3, metrics_address="0.0.0.0", metrics_config=["a=1"], trace_config=["rate=1"],
        cache_config=["local,size=1"], cache_directory=pathlib.Path("/d"), buffer_manager_thread_count=1,
    )
    unset = [f.name for f in dataclasses.fields(TritonConfig) if getattr(every_field, f.name) is None]
    # Not tritonserver flags: served repositories, where the log goes, the relay's own limit and
    # spin, the control mode pytriton_like runs over the user's repository (the server stays explicit),
    # and which Triton install runs.
    assert unset == [
        "model_repository", "log_file", "shm_limit_bytes", "relay_spin_us", "relay_in_flight", "model_control_mode",
        "repository_poll_secs", "load_model", "extra_args", "drain_secs", "triton_home",
        "allow_openai", "openai_address", "openai_port", "openai_api_key",  # the OpenAI endpoint is a process of ours
        "max_restarts", "restart_window_secs",  # how pytriton_like restarts tritonserver and the endpoint
        "openai_max_unread_bytes",
        "server_memory_growth_bytes",  # when pytriton_like restarts tritonserver on purpose
    ]
    emitted = {flag for flag, _ in flags(argv(every_field, startup=["m"]))}
    assert emitted <= TRITONSERVER_FLAGS, emitted - TRITONSERVER_FLAGS
    # + repository, backends, control, load, the relay backend's config
    assert len(emitted) == len(dataclasses.fields(TritonConfig)) - len(unset) + 5


def test_openai_endpoint_fields():
    assert TritonConfig().openai_endpoint_port() is None  # off by default
    assert TritonConfig(allow_openai=True).openai_endpoint_port() == 9000
    assert TritonConfig(allow_openai=True, openai_port=9100).openai_endpoint_port() == 9100
    config = TritonConfig.from_env(env(allow_openai="true", openai_port="9200", openai_api_key="sk-secret"))
    assert config.openai_endpoint_port() == 9200 and config.openai_api_key == "sk-secret"
    assert "sk-secret" not in repr(config)
    args = argv(TritonConfig(allow_openai=True, openai_port=9100, openai_api_key="k"), startup=["m"])
    assert not any("openai" in arg for arg in args)
    with pytest.raises(PyTritonValidationError, match=r"openai_port must be within 1..65535, got 0"):
        TritonConfig(openai_port=0)
    for fields in ({"allow_grpc": False}, {"grpc_use_ssl": True}):
        with pytest.raises(PyTritonValidationError, match=r"allow_openai needs the gRPC endpoint without SSL"):
            TritonConfig(allow_openai=True, **fields)


def test_openai_max_unread_bytes():
    assert TritonConfig().openai_unread_limit() == 1 << 20
    config = TritonConfig.from_env(env(allow_openai="true", openai_max_unread_bytes="65536"))
    assert config.openai_max_unread_bytes == 65536 and config.openai_unread_limit() == 65536
    with pytest.raises(PyTritonValidationError, match=r"openai_max_unread_bytes must be 1 or more, got 0"):
        TritonConfig(openai_max_unread_bytes=0)


def test_argv_is_pure():
    config = TritonConfig(trace_config=["rate=1"])
    first = argv(config, startup=["m"])
    assert argv(config, startup=["m"]) == first
    assert config == TritonConfig(trace_config=["rate=1"])
    assert all(isinstance(arg, str) for arg in first)


# -- model control mode (pytriton_like's, over the user's repository) -------------------------


def test_control_mode_fields_from_env():
    config = TritonConfig.from_env(
        env(model_control_mode="explicit", repository_poll_secs="0.5", load_model_0="a", load_model_1="b")
    )
    assert config.model_control_mode == "explicit"
    assert config.repository_poll_secs == 0.5
    assert config.load_model == ["a", "b"]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"model_control_mode": "auto"}, "model_control_mode must be one of none, explicit, poll, got 'auto'"),
        ({"model_control_mode": "poll", "repository_poll_secs": 0}, "repository_poll_secs must be > 0"),
        ({"load_model": ["a"]}, "load_model needs model_control_mode='explicit', got 'none'"),
        ({"model_control_mode": "poll", "load_model": ["a"]}, "got 'poll'"),
    ],
)
def test_control_mode_is_checked(fields, message):
    with pytest.raises(PyTritonValidationError, match=re.escape(message)):
        TritonConfig(**fields)


def test_argv_keeps_the_server_in_explicit_mode_whatever_the_mode():
    for mode in ("none", "explicit", "poll"):
        config = TritonConfig(model_control_mode=mode, repository_poll_secs=2)
        args = argv(config, startup=["bound", "from_repo"])
        assert values_of(args, "model-control-mode") == ["explicit"]
        assert values_of(args, "load-model") == ["bound", "from_repo"]
        assert values_of(args, "repository-poll-secs") == []


# -- extra_args: options TritonConfig does not name ----------------------------------------------


def test_extra_args_dict_becomes_flags_after_the_named_ones():
    config = TritonConfig(
        strict_readiness=True,
        extra_args={"model-load-thread-count": 4, "--log-format": "ISO8601", "strict_model_config": False,
                    "backend-config": ["python,a=1", "python,b=2"], "model-namespacing": None},
    )
    args = argv(config)
    tail = args[-6:]
    assert tail == [
        "--model-load-thread-count=4", "--log-format=ISO8601", "--strict-model-config=false",
        "--backend-config=python,a=1", "--backend-config=python,b=2", "--model-namespacing",
    ]
    assert values_of(args[:-6], "strict-readiness") == ["true"]
    assert {flag[2:].split("=")[0] for flag in tail} <= TRITONSERVER_FLAGS


def test_extra_args_list_of_flags_kept_as_given():
    config = TritonConfig(extra_args=["--model-load-thread-count=2", "--rate-limit=off", "model-load-retry-count=1"])
    assert config.extra_flags() == ["--model-load-thread-count=2", "--rate-limit=off", "--model-load-retry-count=1"]
    assert argv(config)[-3:] == config.extra_flags()


def test_extra_args_from_env_one_flag_or_indexed_list():
    one = TritonConfig.from_env(env(extra_args="--model-load-thread-count=4"))
    assert one.extra_flags() == ["--model-load-thread-count=4"]
    several = TritonConfig.from_env(env(extra_args_1="--log-format=ISO8601", extra_args_0="--model-load-thread-count=4"))
    assert several.extra_flags() == ["--model-load-thread-count=4", "--log-format=ISO8601"]
    assert TritonConfig(extra_args={"rate-limit": "off"}).with_env(env(extra_args="--x=1")).extra_flags() == [
        "--rate-limit=off"
    ]


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"http-port": 9000}, r"--http-port is controlled by pytriton_like: TritonConfig.http_port sets it; use the field"),
        (["--grpc_port=1"], r"--grpc-port .*TritonConfig.grpc_port"),
        ({"metrics-port": 1}, r"--metrics-port .*TritonConfig.metrics_port"),
        (["--model-control-mode=poll"], r"--model-control-mode .*explicit mode; use TritonConfig.model_control_mode"),
        (["--model-repository=/x"], r"--model-repository .*Triton\(model_repository=...\)"),
        (["--model-store=/x"], r"--model-store "),
        ({"load-model": "m"}, r"--load-model .*TritonConfig.load_model"),
        ({"repository-poll-secs": 1}, r"--repository-poll-secs "),
        ({"backend-directory": "/b"}, r"--backend-directory .*bundled backends"),
        ({"cache-directory": "/c"}, r"--cache-directory .*TritonConfig.cache_directory"),
        ({"http-restricted-api": "x:a=b"}, r"--http-restricted-api .*security_config"),
        ({"grpc-restricted-protocol": "x:a=b"}, r"--grpc-restricted-protocol .*security_config"),
        ({"allow-sagemaker": True}, r"--allow-sagemaker .*without the access token"),
        ({"vertex-ai-port": 1}, r"--vertex-ai-port .*without the access token"),
        ({"reuse-grpc-port": 1}, r"--reuse-grpc-port .*ports"),
        ({"log-file": "/l"}, r"--log-file .*TritonConfig.log_file"),
        ({"log-info": False}, r"--log-info .*INFO lines"),
        ({"exit-timeout-secs": 1}, r"TritonConfig.exit_timeout_secs sets it"),
        ({"bad name": 1}, r"'bad name' is not a tritonserver option name"),
        ({"x": {"nested": 1}}, r"option 'x' has a value of type dict"),
        ("--model-load-thread-count=4", r"must be a dict of options or a list of flags, got str"),
        ([4], r"flags must be strings, got 4"),
    ],
)
def test_extra_args_refused_with_a_clear_error(extra, message):
    with pytest.raises(PyTritonValidationError, match=message):
        TritonConfig(extra_args=extra)


def test_extra_args_refused_from_env_too():
    with pytest.raises(PyTritonValidationError, match=r"--http-port is controlled"):
        TritonConfig.from_env(env(extra_args="--http-port=1"))
