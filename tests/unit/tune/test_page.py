"""The report's plots for a tune where no trial measured anything (every start failed)."""

import pytest

pytest.importorskip("matplotlib")

from pytriton_like.tune.page import concurrency_plot, pareto_plot  # noqa: E402

NOTHING_MEASURED = {
    "goal": {"latency_budget_ms": None, "objective": "throughput", "concurrency": [1, 2]},
    "recommended": None,
    "trials": [{"trial": 1, "throughput": None, "given": True, "excluded": True}],
}


def test_a_report_without_a_measurement_draws_empty_plots_without_a_warning():
    # the suite turns warnings into errors: matplotlib's "No artists with labels" would fail here
    for plot in (concurrency_plot, pareto_plot):
        assert plot(NOTHING_MEASURED).lstrip().startswith(("<svg", "<?xml"))
