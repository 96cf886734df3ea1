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


def test_model_repository_serves_a_hand_written_model_and_two_versions():
    output = run_example(EXAMPLES / "run.py", "model_repository")
    assert output.count("Square version default: y = [1.0, 4.0, 9.0]") == 2
    assert output.count("Scale version 1: y = [2.0, 4.0, 6.0]") == 2
    assert output.count("Scale version 2: y = [3.0, 6.0, 9.0]") == 2
    assert output.count("Scale version default: y = [3.0, 6.0, 9.0]") == 2  # the highest version
    for line in ("index: Scale version 1 READY", "index: Scale version 2 READY", "index: Square version 1 READY"):
        assert output.count(line) == 2
    assert "server stopped (exit code 0)" in output
