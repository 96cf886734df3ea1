"""tune's command line: its flags, the extras it needs, and the report built from trials."""

import sys

import pytest

from pytriton_like.cli import build_parser, main
from pytriton_like.tune.choice import Goal, choose
from pytriton_like.tune.command import parse_levels
from pytriton_like.tune.page import render_page
from pytriton_like.tune.report import build_report, summary_lines
from pytriton_like.tune.settings import Settings
from pytriton_like.tune.trial import Measurement, Trial, TrialStatus


def test_concurrency_levels_are_one_a_list_or_powers_of_two():
    assert parse_levels("32") == [32]
    assert parse_levels("8,1,8,4") == [1, 4, 8]
    assert parse_levels("1:64") == [1, 2, 4, 8, 16, 32, 64]
    assert parse_levels("3:20") == [3, 6, 12, 20]
    for bad in ("0", "a", "8:2", ""):
        with pytest.raises(ValueError):
            parse_levels(bad)


def test_tune_takes_serves_model_and_settings_flags():
    args = build_parser().parse_args(["tune", "m:f", "--input", "x:int64:-1", "--max-batch-size", "8", "--workers",
                                      "2", "--concurrency", "4,16", "--latency-budget-ms", "50"])
    assert (args.inputs, args.max_batch_size, args.workers, args.concurrency) == (["x:int64:-1"], 8, 2, [4, 16])
    assert args.search == "quick" and args.time_budget_s == 300


def test_missing_extras_are_named_with_the_command_that_installs_them(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it fails
    assert main(["tune", "m:f", "--report", "out"]) == 1
    assert capsys.readouterr().err == (
        "pytriton_like tune: error: it needs matplotlib (the tune extra): pip install matplotlib tqdm, or install"
        " pytriton_like with its [tune] extra\n")


def _trial(number, settings, *rows, status=TrialStatus.OK, error=None, given=False):
    trial = Trial(number=number, settings=settings, given=given)
    trial.begin()
    for concurrency, throughput, p99 in rows:
        trial.measurements.append(Measurement(concurrency, throughput, p99 / 2, p99, 100, 1.0, 0.3, 90.0, 0.1))
    trial.finish(status, error)
    return trial


def _report(trials, goal):
    choice = choose(trials, goal, [1, 8])
    search = {"strategy": "quick", "ended": "converged", "elapsed_s": 12.0}
    report = build_report(target="m:f", model_name="f", model_flags=["--input", "x:float32:-1"], trials=trials,
                          choice=choice, goal=goal, levels=[1, 8], search=search)
    return report, choice


def test_the_report_and_the_terminal_say_the_choice_and_how_to_apply_it(tmp_path):
    trials = [_trial(1, Settings(1), (1, 50, 21), (8, 50, 170), given=True),
              _trial(2, Settings(8, 2000), (1, 40, 25), (8, 390, 22)),
              _trial(3, Settings(16), (1, 50, 21), status=TrialStatus.WRONG_ANSWERS, error="at concurrency 8, ...")]
    report, choice = _report(trials, Goal())
    assert report["recommended"]["max_batch_size"] == 8 and report["recommended"]["concurrency"] == 8
    assert report["given"]["concurrency"] == 8 and len(report["trials"]) == 5
    lines = summary_lines(report, choice, report_path=tmp_path / "report.json")
    assert lines[1] == "  excluded: trial 3 (max_batch_size 16, 1 instance): wrong answers: at concurrency 8, ..."
    assert "  the given settings (max_batch_size 1, 1 instance): 50 req/s at 8 clients, p50 85.0 ms, p99 170.0 ms:" \
           " 7.8x the throughput" in lines
    assert ("  as a command: pytriton_like serve m:f --input x:float32:-1 --max-batch-size 8"
            " --max-queue-delay-microseconds 2000") in lines
    page = render_page(report, lines)
    assert page.count("<svg") == 2 and "<script" not in page and "7.8x the throughput" in page


def test_a_report_without_a_recommendation_shows_the_closest():
    trials = [_trial(1, Settings(1), (1, 50, 21), given=True)]
    report, choice = _report(trials, Goal(latency_budget_ms=5))
    assert report["recommended"] is None and report["closest"]["p99_ms"] == 21
    assert summary_lines(report, choice)[1].startswith("no setting met the latency budget (p99 <= 5 ms); the closest")
    assert 'class="box none"' in render_page(report, ["-"])


def test_a_callable_that_cannot_be_called_here_is_compared_with_the_given_settings_answers(tmp_path, monkeypatch):
    from pytriton_like.tune.run import Run

    (tmp_path / "needs_worker.py").write_text(
        "from pytriton_like.decorators import batch\n\n@batch\ndef predict(x):\n"
        "    raise RuntimeError('the model is loaded in setup_worker')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    args = build_parser().parse_args(["tune", "needs_worker:predict", "--shape", "x:3"])
    run = Run.from_arguments(args)
    assert all(sample.expected is None for sample in run.samples)
    assert run.samples[0].inputs["x"].shape == (1, 3)
    assert run.reference.startswith("the given settings' answers, one request at a time (calling the callable here"
                                    " failed: RuntimeError: the model is loaded in setup_worker)")
    with pytest.raises(Exception, match="--shape names no input: y"):
        Run.from_arguments(build_parser().parse_args(["tune", "needs_worker:predict", "--shape", "y:3"]))
