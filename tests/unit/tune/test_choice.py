"""The goal and the choice: the budget, when levels stop, ties, the closest, the Pareto front."""

import pytest

from pytriton_like.tune.choice import Goal, choose, pareto_front
from pytriton_like.tune.settings import Settings
from pytriton_like.tune.trial import Measurement, Trial, TrialStatus


def m(concurrency, throughput, p99):
    return Measurement(concurrency, throughput, p99 / 2, p99, 100, 1.0, 0.5, 80.0, 0.1)


def trial(number, settings, *measurements, status=TrialStatus.OK, given=False):
    record = Trial(number=number, settings=settings, given=given)
    record.begin()
    record.measurements.extend(measurements)
    record.finish(status, None if status is TrialStatus.OK else "wrong")
    return record


def test_the_highest_throughput_within_the_budget_wins_and_the_given_numbers_are_at_its_concurrency():
    goal = Goal(latency_budget_ms=50)
    given = trial(1, Settings(1), m(1, 45, 22), m(4, 45, 90), given=True)
    small = trial(2, Settings(4, 60000), m(1, 15, 70), m(4, 136, 32), m(16, 140, 120))
    big = trial(3, Settings(16, 60000), m(4, 44, 90), m(16, 287, 57))
    choice = choose([given, small, big], goal, [1, 4, 16])
    assert choice.recommended.trial is small and choice.recommended.measurement.concurrency == 4
    assert choice.given.measurement.concurrency == 4  # compared at the same load
    assert choose([given, small, big], Goal(latency_budget_ms=60), [1, 4, 16]).recommended.trial is big


def test_ties_go_to_the_cheapest_settings_and_the_lowest_concurrency():
    goal = Goal()
    one = trial(1, Settings(8), m(4, 300, 13), m(8, 310, 26))
    more = trial(2, Settings(8, instances=2), m(4, 300, 13), m(8, 315, 25))
    processes = trial(3, Settings(8, workers=2), m(4, 305, 13))
    choice = choose([processes, more, one], goal, [4, 8])
    assert choice.recommended.trial is one and choice.recommended.measurement.concurrency == 4


def test_wrong_answers_are_never_recommended_and_are_listed_as_excluded():
    fast_but_wrong = trial(1, Settings(16), m(8, 5000, 2), status=TrialStatus.WRONG_ANSWERS)
    slow = trial(2, Settings(1), m(8, 100, 80), given=True)
    choice = choose([fast_but_wrong, slow], Goal(), [8])
    assert choice.recommended.trial is slow and choice.excluded == [fast_but_wrong]


def test_a_budget_no_one_meets_recommends_nothing_and_shows_the_closest():
    trials = [trial(1, Settings(1), m(1, 50, 30), m(4, 50, 80)), trial(2, Settings(4), m(4, 80, 52))]
    choice = choose(trials, Goal(latency_budget_ms=10), [1, 4])
    assert choice.recommended is None
    assert choice.closest.trial.number == 1 and choice.closest.measurement.p99_ms == 30


def test_levels_stop_past_the_budget_unless_batches_wait_for_a_delay_and_when_throughput_stops_rising():
    goal = Goal(latency_budget_ms=50)
    assert goal.stop_after(Settings(4), [m(1, 50, 20), m(4, 60, 70)]) == "p99 70.0 ms over the budget at concurrency 4"
    assert goal.stop_after(Settings(16, 60000), [m(4, 40, 90)]) is None  # more clients fill the batch sooner
    flat = [m(1, 100, 10), m(2, 190, 11), m(4, 195, 21), m(8, 196, 41)]
    assert goal.stop_after(Settings(4), flat) == "throughput stopped rising at concurrency 2"
    assert Goal(objective="latency").stop_after(Settings(4), flat) is None


def test_the_latency_objective_compares_p99_at_the_highest_level():
    goal = Goal(objective="latency")
    a = trial(1, Settings(4), m(1, 100, 5), m(16, 400, 60))
    b = trial(2, Settings(16), m(1, 90, 7), m(16, 380, 45))
    assert choose([a, b], goal, [1, 16]).recommended.trial is b
    with pytest.raises(ValueError):
        Goal(objective="speed")


def test_the_pareto_front_keeps_points_no_other_beats_on_both():
    points = [(10, 100), (20, 300), (15, 90), (30, 250), (40, 500), (5, 20)]
    assert pareto_front(points) == [5, 0, 1, 4]
