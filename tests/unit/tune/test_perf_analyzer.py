"""perf_analyzer as the measuring generator: what it is given and what is read back (a stand-in program)."""

import asyncio
import json
import stat
import sys

import numpy as np
import pytest

from pytriton_like.tune.perf_analyzer import PerfAnalyzer
from pytriton_like.tune.samples import Sample

STAND_IN = """#!{python}
import json, pathlib, sys
argv = sys.argv[1:]
data = json.loads(pathlib.Path(argv[argv.index("--input-data") + 1]).read_text())
pathlib.Path({log!r}).write_text(json.dumps({{"argv": argv, "data": data}}))
if "-m" in argv and argv[argv.index("-m") + 1] == "broken":
    print("error: the model is not ready")
    sys.exit(99)
out = argv[argv.index("-f") + 1]
pathlib.Path(out).write_text("Concurrency,Inferences/Second,p50 latency,p99 latency\\n8,1234.5,2100,4800\\n")
"""


@pytest.fixture
def stand_in(tmp_path):
    program = tmp_path / "perf_analyzer"
    program.write_text(STAND_IN.format(python=sys.executable, log=str(tmp_path / "argv.json")))
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return PerfAnalyzer.find(str(program)), tmp_path / "argv.json"


def test_it_sends_the_samples_and_reads_its_numbers(stand_in):
    analyzer, log = stand_in
    samples = [Sample({"x": np.full((1, 3), 2.0, np.float32), "t": np.array([[b"ab"]], dtype=object)})]
    numbers = asyncio.run(analyzer.measure("m", 8000, samples, True, 8, 0.5))
    assert (numbers["throughput"], numbers["p50_ms"], numbers["p99_ms"]) == (1234.5, 2.1, 4.8)
    logged = json.loads(log.read_text())
    argv = logged["argv"]
    assert logged["data"] == {"data": [{"x": {"content": [2.0, 2.0, 2.0], "shape": [3]},
                                        "t": {"content": ["ab"], "shape": [1]}}]}  # no batch axis: -b 1
    assert argv[:6] == ["-m", "m", "-u", "127.0.0.1:8000", "-i", "http"]
    assert "--concurrency-range=8" in argv and "--measurement-interval=500" in argv


def test_a_failure_says_its_last_lines_and_a_missing_program_is_said(stand_in, tmp_path):
    analyzer, _ = stand_in
    with pytest.raises(RuntimeError, match="perf_analyzer ended with 99:\nerror: the model is not ready"):
        asyncio.run(analyzer.measure("broken", 8000, [Sample({"x": np.ones((1, 1), np.float32)})], True, 1, 0.1))
    with pytest.raises(FileNotFoundError, match="no such program"):
        PerfAnalyzer.find(str(tmp_path / "nowhere"))
