"""Every example in examples/ runs and prints the right answers."""

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


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
