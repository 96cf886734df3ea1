"""RelayMetrics: what a batch adds, and what is published (with a stand-in for the stub's metrics API)."""

import time
import types

from pytriton_like.proxy.metrics import FAMILIES, RelayMetrics


class Metric:
    def __init__(self, labels):
        self.labels = labels
        self.increments = []

    def increment(self, value):
        self.increments.append(value)


class MetricFamily:
    COUNTER = "counter"

    def __init__(self, name, description, kind):
        self.name = name
        self.kind = kind
        self.metrics = []

    def Metric(self, labels):  # noqa: N802 - the stub's spelling
        metric = Metric(labels)
        self.metrics.append(metric)
        return metric


def make(period_s=3600.0):
    families = []

    def family(**kwargs):
        families.append(MetricFamily(**kwargs))
        return families[-1]

    family.COUNTER = MetricFamily.COUNTER
    metrics = RelayMetrics(types.SimpleNamespace(MetricFamily=family), "M", "2", period_s=period_s)
    return metrics, families


def published(families) -> dict:
    return {
        (family.name, metric.labels.get("reason")): sum(metric.increments)
        for family in families
        for metric in family.metrics
    }


def test_one_family_per_name_with_model_and_version_labels():
    metrics, families = make()
    metrics.close()
    assert sorted(family.name for family in families) == sorted({name for name, _, _ in FAMILIES.values()})
    assert all(family.kind == "counter" for family in families)
    for family in families:
        for metric in family.metrics:
            assert metric.labels["model"] == "M" and metric.labels["version"] == "2"


def test_batches_add_up_and_are_published_at_close():
    metrics, families = make()
    metrics.record(3, execute_ns=5_000_000, callable_ns=2_000_000)
    metrics.record(2, execute_ns=1_000_500, callable_ns=400, callable_errors=2)
    metrics.record(1, execute_ns=700_000, relay_errors=1)
    assert published(families)[("pytriton_like_requests", None)] == 0  # nothing before the thread's turn
    metrics.close()
    values = published(families)
    assert values[("pytriton_like_requests", None)] == 6
    assert values[("pytriton_like_batches", None)] == 3
    assert values[("pytriton_like_request_failures", "callable")] == 2
    assert values[("pytriton_like_request_failures", "relay")] == 1
    assert values[("pytriton_like_callable_duration_us", None)] == 2000  # 2_000_400 ns, whole µs
    assert values[("pytriton_like_relay_duration_us", None)] == 3000 + 1000 + 700  # 4_700_100 ns


def test_a_missing_or_bad_callable_time_counts_as_zero():
    metrics, families = make()
    metrics.record(1, execute_ns=2000, callable_ns="garbage")
    metrics.record(1, execute_ns=2000, callable_ns=5000)  # longer than execute: no negative relay time
    metrics.close()
    values = published(families)
    assert values[("pytriton_like_callable_duration_us", None)] == 5
    assert values[("pytriton_like_relay_duration_us", None)] == 2


def test_streaming_counts_errors_and_time_after_the_batch():
    metrics, families = make()
    metrics.record(2)
    metrics.record_errors(callable_errors=1, callable_ns=3_000_000)
    metrics.close()
    values = published(families)
    assert values[("pytriton_like_requests", None)] == 2
    assert values[("pytriton_like_request_failures", "callable")] == 1
    assert values[("pytriton_like_callable_duration_us", None)] == 3000
    assert values[("pytriton_like_relay_duration_us", None)] == 0


def test_the_thread_publishes_without_close():
    metrics, families = make(period_s=0.01)
    metrics.record(4)
    try:
        deadline = time.monotonic() + 10
        while published(families)[("pytriton_like_requests", None)] != 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert published(families)[("pytriton_like_requests", None)] == 4
    finally:
        metrics.close()
