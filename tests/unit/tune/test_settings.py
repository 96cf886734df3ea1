"""Settings: a consistent value, as bind() arguments and serve flags, read back from a report."""

import argparse
import json

import pytest

from pytriton_like.cli import build_parser
from pytriton_like.cli.flags import settings_from_arguments
from pytriton_like.exceptions import PyTritonBadParameterError
from pytriton_like.model_config import DynamicBatcher, ModelConfig
from pytriton_like.tune.settings import Settings, read_recommended


def test_settings_that_do_not_go_together_are_refused_with_the_reason():
    with pytest.raises(PyTritonBadParameterError, match="instances .2. and workers .2. do not combine"):
        Settings(max_batch_size=4, instances=2, workers=2)
    with pytest.raises(PyTritonBadParameterError, match="preferred batch sizes must be from 1 to max_batch_size .4."):
        Settings(max_batch_size=4, max_queue_delay_microseconds=100, preferred_batch_sizes=(8,))
    with pytest.raises(PyTritonBadParameterError, match="need batching"):
        Settings(max_batch_size=0, max_queue_delay_microseconds=100)
    with pytest.raises(PyTritonBadParameterError, match="0 or more"):
        Settings(max_batch_size=-1)


def test_the_model_config_carries_the_batcher_settings():
    settings = Settings(max_batch_size=32, max_queue_delay_microseconds=2000, preferred_batch_sizes=(16, 8))
    assert settings.preferred_batch_sizes == (8, 16)
    config = settings.model_config()
    assert config == ModelConfig(max_batch_size=32, batcher=DynamicBatcher(max_queue_delay_microseconds=2000,
                                                                          preferred_batch_size=[8, 16]))
    assert Settings(max_batch_size=0).model_config().batching is False


def _parse(flags):
    return build_parser().parse_args(["serve", "m:f", *flags])


@pytest.mark.parametrize("settings", [
    Settings(max_batch_size=4),
    Settings(max_batch_size=0),
    Settings(max_batch_size=64, max_queue_delay_microseconds=50000, preferred_batch_sizes=(32,)),
    Settings(max_batch_size=8, instances=3),
    Settings(max_batch_size=1, workers=2),
])
def test_serve_flags_give_the_same_settings_back(settings):
    assert settings_from_arguments(_parse(settings.serve_flags())) == settings


def test_bind_arguments_are_python_that_makes_the_same_settings():
    settings = Settings(max_batch_size=32, max_queue_delay_microseconds=2000, instances=2)
    text = settings.bind_arguments("predict")
    assert text == ("infer_func=[predict] * 2, config=ModelConfig(max_batch_size=32,"
                    " batcher=DynamicBatcher(max_queue_delay_microseconds=2000))")
    arguments = eval(f"dict({text})", {"ModelConfig": ModelConfig, "DynamicBatcher": DynamicBatcher, "predict": len})
    assert arguments["config"] == settings.model_config() and arguments["infer_func"] == [len, len]
    assert Settings(max_batch_size=1, workers=4).bind_arguments() == (
        "infer_func=infer_func, config=ModelConfig(max_batch_size=1), workers=4")


def test_flags_given_win_over_a_report(tmp_path):
    report = tmp_path / "report.json"
    recommended = Settings(max_batch_size=32, max_queue_delay_microseconds=20000).as_dict()
    report.write_text(json.dumps({"recommended": {**recommended, "throughput": 1000.0}}))
    base = read_recommended(str(tmp_path))  # the folder is enough
    assert base == Settings(max_batch_size=32, max_queue_delay_microseconds=20000)
    assert settings_from_arguments(_parse(["--workers", "2"]), base) == Settings(32, 20000, (), 1, 2)
    assert settings_from_arguments(_parse(["--max-batch-size", "0"]), base) == Settings(max_batch_size=0)


def test_a_report_that_recommends_nothing_says_so(tmp_path):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"recommended": None, "closest": {"p99_ms": 42.5}}))
    with pytest.raises(PyTritonBadParameterError, match="recommends nothing: no setting met its latency budget; the"
                       " closest had p99 42.5 ms"):
        read_recommended(str(report))
    report.write_text("[]")
    with pytest.raises(PyTritonBadParameterError, match="not a report of pytriton_like tune"):
        read_recommended(str(report))
    with pytest.raises(PyTritonBadParameterError, match="cannot read"):
        read_recommended(str(tmp_path / "missing.json"))


def test_negative_flags_are_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        _parse(["--max-queue-delay-microseconds", "-5"])
    assert "must be 0 or more, got -5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _parse(["--preferred-batch-size", "4,x"])
    assert isinstance(_parse(["--preferred-batch-size", "4,8"]), argparse.Namespace)
