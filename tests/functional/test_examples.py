"""Every example in examples/ runs and prints the right answers.

The framework examples run where their framework is installed: scikit-learn and ONNX Runtime come
with the test extra (``make venv``); PyTorch's CPU build with ``make examples-frameworks``.
"""

import importlib.util
import pathlib
import re
import signal
import subprocess
import sys

import pytest

from .conftest import free_ports
from .handwritten import needs_numpy1
from .processes import Serving

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def needs(module: str, how: str):
    """Skip unless ``module`` can be imported; the reason says how to install it."""
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"{module} is not installed: {how}")


def run_example(*args, timeout_s=180) -> str:
    completed = subprocess.run(
        [sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout_s, check=False
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def test_add_sub_demo_over_http_and_grpc():
    output = run_example(EXAMPLES / "run.py", "add_sub")
    for scheme in ("http", "grpc"):
        assert f"[{scheme}://127.0.0.1:" in output
    assert output.count("add = [[1.5, 2.5, 3.5], [5.0, 7.0, 9.0]]") == 2
    assert output.count("sub = [[0.5, 1.5, 2.5], [3.0, 3.0, 3.0]]") == 2
    assert "server stopped (exit code 0)" in output


def test_parameters_and_headers():
    output = run_example(EXAMPLES / "run.py", "parameters_and_headers")
    assert output.count("y = [[10.5, 20.5, 30.5]]") == 2


def test_optional_inputs():
    output = run_example(EXAMPLES / "run.py", "optional_inputs")
    assert output.count("x only (bias defaults to 100): y = [[101.0, 102.0], [103.0, 104.0]]") == 2
    assert output.count("x, bias=1: y = [[2.0, 3.0], [4.0, 5.0]]") == 2
    assert output.count("x, bias=1, gain=3: y = [[4.0, 7.0], [10.0, 13.0]]") == 2


def test_streaming_prints_each_word_as_it_arrives():
    output = run_example(EXAMPLES / "run.py", "streaming", "--protocols", "grpc")  # HTTP cannot stream
    assert "] story: Once upon a time a tiny model told a story about dragons, one word at a time.\n" in output
    assert "] 17 words streamed" in output
    assert "server stopped (exit code 0)" in output


@pytest.mark.alone  # the search measures (test_tune.py says why)
def test_tuning_finds_the_batching_and_serve_uses_it():
    output = run_example(EXAMPLES / "run.py", "tuning", timeout_s=300)
    assert "recommended: max_batch_size 32, delay 50000 µs, 1 instance (trial 3)" in output
    assert output.count("] Sleepy serves with max_batch_size 32, queue delay 50000 µs") == 2
    assert output.count("] 32 clients, 160 calls: 160 answers y = 2x") == 2
    assert "server stopped (exit code 0)" in output


def test_runner_sync_and_async():
    output = run_example(EXAMPLES / "run.py", "runner")
    for expected in (
        "] models: AddSub, Scale",
        "] sync AddSub add = [[1.5, 2.5], [4.0, 5.0]]",
        "] sync AddSub output 'sub': {'name': 'sub', 'datatype': 'FP32', 'shape': [2, 2]}",
        "] sync Scale scaled = [10.0, 20.0, 30.0] (model Scale version 1)",
        "] Scale ready: True",
        "] async AddSub add = [[2.0, 2.0]]",
        "] async Scale scaled = [5.0]",
        "] AddSub max_batch_size: 16",
        "] server 2.51.0 live: True",
        "] AddSub inputs: ['a', 'b']",
        "] log format (TritonConfig.extra_args): ISO8601",
        "] trace level: ['OFF']",
        "] system shared-memory regions: []",
        "] async server ready: True",
    ):
        assert output.count(expected) == 2, expected  # once over HTTP, once over gRPC
    assert output.count("] stream_infer Count: [0, 1, 2]") == 1  # gRPC only
    assert "server stopped (exit code 0)" in output


def test_metrics_and_cache():
    output = run_example(EXAMPLES / "run.py", "metrics_and_cache")
    for calls in (1, 2):  # the HTTP run, then the gRPC one with an input of its own
        assert f"] first answer: y = 2x, the callable's call count = {calls}\n" in output
        assert f"] same request again: call count = {calls} -> answered from the cache\n" in output
    for expected in (
        "] nv_cache_num_hits_per_model: +1\n",
        "] nv_cache_num_misses_per_model: +1\n",
        "] pytriton_like_requests: +1\n",
        '] pytriton_like_request_failures{reason="callable"}: +0\n',
    ):
        assert output.count(expected) == 2, expected
    assert output.count("] pytriton_like_callable_duration_us: ") == 2


def test_stateful_running_sums_over_http_and_grpc():
    output = run_example(EXAMPLES / "run.py", "stateful")
    assert output.count("] step 1: alice=1 42=10 bob=100\n") == 2
    assert output.count("] step 3: alice=6 42=60 bob=300\n") == 2
    assert output.count("] step 5: alice=15 42=150 bob=500\n") == 2
    # each sequence stays on one instance
    assert output.count("was served by instance(s) [0]\n") + output.count("was served by instance(s) [1]\n") == 6


@needs_numpy1
def test_model_repository_serves_a_hand_written_model_and_two_versions():
    output = run_example(EXAMPLES / "run.py", "model_repository")
    assert output.count("Square version default: y = [1.0, 4.0, 9.0]") == 2
    assert output.count("Scale version 1: y = [2.0, 4.0, 6.0]") == 2
    assert output.count("Scale version 2: y = [3.0, 6.0, 9.0]") == 2
    assert output.count("Scale version default: y = [3.0, 6.0, 9.0]") == 2  # the highest version
    for line in ("index: Scale version 1 READY", "index: Scale version 2 READY", "index: Square version 1 READY"):
        assert output.count(line) == 2


def test_ensemble_is_called_as_one_model():
    output = run_example(EXAMPLES / "run.py", "ensemble")
    assert output.count("'I love this great phone' -> positive") == 2
    assert output.count("'awful battery and slow' -> negative") == 2
    assert output.count("'it is a phone' -> neutral") == 2
    assert "server stopped (exit code 0)" in output


def test_business_logic_routes_each_request_to_another_model():
    output = run_example(EXAMPLES / "run.py", "business_logic")
    for model in ("Router", "AsyncRouter"):
        assert output.count(f"] {model}: 'hello' -> fast: hello") == 2
        assert output.count(f"] {model}: 'a rather long text that the thorough model gets' -> thorough: 9 words") == 2
    assert "server stopped (exit code 0)" in output


def test_shared_memory_client():
    output = run_example(EXAMPLES / "run.py", "shared_memory")
    assert output.count("] regions registered: 1, 128 MiB") == 2  # 64 MiB in and 64 MiB out, one region
    assert output.count("] after close: 0 segments of this client in /dev/shm") == 2
    assert output.count("] 64 MiB in and out: shared memory ") == 2  # times vary: not compared here (bench/)
    assert "server stopped (exit code 0)" in output


@needs_numpy1
def test_s3_repository_served_from_a_stand_in_s3_server():
    output = run_example(EXAMPLES / "run.py", "s3_repository")
    assert output.count("] Square from S3: y = [1.0, 4.0, 9.0]") == 2
    assert output.count("] index: Square READY") == 2
    assert "server stopped (exit code 0)" in output


def test_cli_serves_a_module_callable_described_by_its_signature():
    output = run_example(EXAMPLES / "run.py", "cli")
    assert output.count("] normalized = [[0.6000000238418579, 0.800000011920929], [0.0, 1.0]]") == 2
    assert output.count("] norm = [[5.0], [2.0]]") == 2
    assert "server stopped (exit code 0)" in output


def test_deployment_service_reports_ready_answers_and_exports_the_queue_metrics():
    output = run_example(EXAMPLES / "run.py", "deployment")
    assert output.count("] live: True, ready: True\n") == 2
    assert output.count("] Linear y = 2x + 1: [[3.0], [6.0]]\n") == 2
    for metric in ("nv_inference_pending_request_count", "nv_inference_queue_duration_us", "nv_inference_request_success"):
        assert output.count(f"] {metric}: present\n") == 2, metric
    assert "server stopped (exit code 0)" in output


def test_remote_mode_binds_from_another_process():
    output = run_example(EXAMPLES / "run.py", "remote_mode")
    assert output.count("] TimesTen (bound from this process): y = [10.0, 20.0]") == 2
    assert output.count("] Local (the server's own): y = [2.0, 3.0]") == 2
    assert output.count("] TimesTen ready after RemoteTriton closed: False") == 2
    assert "server stopped (exit code 0)" in output


def test_warmup_runs_before_the_first_request():
    output = run_example(EXAMPLES / "run.py", "warmup")
    assert output.count("] y = [3.0, 6.0]") == 2
    assert "] batches the callable saw before this request: 2" in output  # the two warm-up batches


def test_tracing_prints_the_request_span_and_its_children():
    output = run_example(EXAMPLES / "run.py", "tracing")
    assert output.count("] WordCount words: 3") == 2 and output.count("] Pipeline words: 3") == 2
    assert output.count("span proxy_inference_callable ") == 6
    assert output.count("span tokenize ") == 4 and output.count("span count ") == 4
    # each Pipeline span has WordCount's span of its nested call as a child
    spans = re.findall(r"span proxy_inference_callable (\w+)(?: \(in (\w+)\))? model=(\w+)", output)
    pipelines = {span_id for span_id, _, model in spans if model == "Pipeline"}
    assert len(pipelines) == 2
    assert {parent for _, parent, model in spans if model == "WordCount" and parent} == pipelines
    # Triton's own trace: each Pipeline request's has the trace of its nested call as a child
    traces = re.findall(r"triton trace (\d+) (\w+)(?: \(in trace (\d+)\))?", output)
    pipelines = {trace_id for trace_id, model, _ in traces if model == "Pipeline"}
    assert len(pipelines) == 2 and len(traces) == 6
    assert sorted(parent for _, model, parent in traces if model == "WordCount") == sorted(["", ""] + list(pipelines))
    assert "server stopped (exit code 0)" in output


def test_workers_tokenize_in_two_processes():
    output = run_example(EXAMPLES / "run.py", "workers")
    assert "'the quick brown fox number 0 jumps' -> [" in output
    assert "calls per worker: {" in output


def test_openai_chat_served_to_the_openai_client_with_an_api_key():
    openai_port, http_port, grpc_port, metrics_port = free_ports(4)
    folder = EXAMPLES / "openai_chat"
    url = f"http://127.0.0.1:{openai_port}/v1"
    with Serving([sys.executable, str(folder / "server.py"), "--openai-port", str(openai_port), "--http-port",
                  str(http_port), "--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port),
                  "--api-key", "sk-example"]) as server:
        server.wait_for("serving; press CTRL+C to stop")
        output = run_example(folder / "client.py", "--url", url, "--api-key", "sk-example")
        refused = subprocess.run(
            [sys.executable, str(folder / "client.py"), "--url", url, "--api-key", "wrong"],
            capture_output=True, text=True, timeout=120, check=False,
        )
        assert server.stop(signal.SIGINT) == 0
    log = server.output
    assert f"OpenAI on http://127.0.0.1:{openai_port}/v1 (listening on all interfaces)" in log
    assert "] models: tiny-chat, tiny-embed\n" in output
    assert "] answer: You asked about 'dragons'; a tiny model can only repeat it.\n" in output
    assert "] finish_reason: stop usage: {'completion_tokens': 11, 'prompt_tokens': 1, 'total_tokens': 12}\n" in output
    assert "] streamed: You asked about 'dragons'; a tiny model can only repeat it.\n" in output
    assert "] streamed usage: {'completion_tokens': 11, 'prompt_tokens': 1, 'total_tokens': 12}\n" in output
    assert "] streamed equals whole: True\n" in output
    assert "] completion: 'You asked about' finish_reason: length\n" in output
    assert "] embeddings: [[11.0, 2.0, 3.0, 1.0], [6.0, 1.0, 2.0, 1.0]]\n" in output
    assert "] unknown model: 404 model_not_found\n" in output
    assert "] async, 4 at once: [\"You asked about 'q0'; a tiny model can only repeat it.\"" in output
    assert refused.returncode != 0 and "AuthenticationError" in refused.stderr



@needs("sklearn", 'the test extra installs scikit-learn (pip install -e ".[test]", make venv)')
def test_sklearn_classifier_answers_as_the_forest_does_in_process():
    output = run_example(EXAMPLES / "run.py", "sklearn_classifier")
    assert output.count("] labels of the first 5 held-out rows: [") == 2
    assert output.count("] accuracy on 100 held-out rows: 0.") == 2
    assert output.count("] equal to predict_proba in this process: True") == 2
    assert "server stopped (exit code 0)" in output


@needs("sklearn", 'the test extra installs scikit-learn (pip install -e ".[test]", make venv)')
def test_sklearn_classifier_served_by_the_command_line_names_the_input_it_needs():
    command = [sys.executable, "-m", "pytriton_like", "serve", "model:classifier"]
    completed = subprocess.run(
        command, cwd=EXAMPLES / "sklearn_classifier", capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 1
    assert "X has 1 features, but RandomForestClassifier is expecting 20 features" in completed.stderr
    assert "give the inputs with --input NAME:DTYPE:SHAPE, e.g. --input features:float32:SIZE" in completed.stderr


@needs("onnxruntime", 'the test extra installs onnx and onnxruntime (pip install -e ".[test]", make venv)')
def test_onnxruntime_mlp_in_two_workers_answers_as_a_local_session():
    output = run_example(EXAMPLES / "run.py", "onnxruntime_mlp")
    assert output.count("] classes of 8 rows: [") == 2
    assert output.count("] 64 rows from 8 threads, match a local InferenceSession's: True") == 2
    assert "server stopped (exit code 0)" in output


@needs("torch", "make examples-frameworks installs PyTorch's CPU build")
def test_pytorch_cpu_answers_as_the_network_does_in_process():
    output = run_example(EXAMPLES / "run.py", "pytorch_cpu")
    assert output.count("] labels of 4 rows: [") == 2
    assert output.count("] 32 rows from 8 threads match the network run here: True") == 2
    assert "server stopped (exit code 0)" in output
