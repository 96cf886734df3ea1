"""The searches against a simulated callable whose numbers are known: what they try, where they end."""

import math

from pytriton_like.tune.choice import Goal, choose
from pytriton_like.tune.search import GridSearch, QuickSearch
from pytriton_like.tune.settings import Settings
from pytriton_like.tune.space import Space
from pytriton_like.tune.trial import Measurement, Trial, TrialStatus


def measured(number, settings, levels, world, given=False):
    """A finished trial with the numbers ``world(settings, concurrency)`` gives: (throughput, p99 ms)."""
    trial = Trial(number=number, settings=settings, given=given)
    trial.begin()
    for concurrency in levels:
        throughput, p99 = world(settings, concurrency)
        trial.measurements.append(Measurement(concurrency, throughput, p99 * 0.9, p99, 100, 1.0, 0.1, 80.0, 0.1))
    trial.finish(TrialStatus.OK)
    return trial


def sleeping(settings, concurrency):
    """20 ms per call whatever the batch; without a delay, clients in a closed loop take turns in two halves."""
    size = max(settings.max_batch_size, 1)
    batch = min(size, concurrency)
    if settings.max_queue_delay_microseconds >= 20000 or batch == 1:
        per_call = 20.0 + (settings.max_queue_delay_microseconds / 1e3 if concurrency < size else 0.0)
    else:
        batch, per_call = (batch / 2 if concurrency <= size else batch), 20.0
    throughput = batch / per_call * 1e3
    return throughput, concurrency / throughput * 1e3


def run(search, levels, world):
    trials = []
    while (settings := search.next()) is not None:
        assert len(trials) < 200, "a search that does not end"
        trial = measured(len(trials) + 1, settings, levels, world, given=not trials)
        trials.append(trial)
        search.observe(trial)
    return trials


SPACE = Space(max_batch_sizes=(1, 2, 4, 8, 16, 32, 64), queue_delays_us=(0, 100, 1000, 50000),
              instances=(1,), workers=(1,))


def test_the_quick_search_climbs_the_batch_size_and_finds_the_delay_past_the_plateau():
    levels = [32]
    search = QuickSearch(SPACE, Settings(max_batch_size=1), Goal(), levels)
    trials = run(search, levels, sleeping)
    choice = choose(trials, Goal(), levels)
    assert choice.recommended.trial.settings == Settings(32, 50000)
    assert search.converged and len(trials) < SPACE.size() / 2
    assert [t.settings.max_batch_size for t in trials[:6]] == [1, 2, 4, 8, 16, 32]  # doubling, as long as it pays


def test_the_grid_search_tries_everything_nearest_first():
    levels = [32]
    search = GridSearch(SPACE, Settings(max_batch_size=4), Goal(), levels)
    trials = run(search, levels, sleeping)
    assert len(trials) == SPACE.size() and search.untried() == 0
    assert trials[0].settings == Settings(4) and trials[0].given
    assert choose(trials, Goal(), levels).recommended.trial.settings == Settings(32, 50000)


def test_a_failed_start_scores_lowest_and_the_climb_goes_on_from_a_working_neighbour():
    levels = [8]
    search = QuickSearch(SPACE, Settings(max_batch_size=4), Goal(), levels)
    failed = Trial(number=1, settings=Settings(max_batch_size=4), given=True)
    failed.begin()
    failed.finish(TrialStatus.NOT_STARTED, "boom")
    assert search.next() == Settings(max_batch_size=4)
    search.observe(failed)
    assert math.isinf(Goal().score(failed, levels).value)
    assert search.next() is not None


def test_a_win_within_a_little_more_than_noise_does_not_drop_the_other_dimension():
    # A callable that holds the GIL: a second thread gains 8 % (a measurement's luck), a second
    # process doubles it. The climb moves to two instances first (its move comes first); the move to
    # two workers, queued around the given settings, must still be tried.
    space = Space(max_batch_sizes=(1,), queue_delays_us=(0,), instances=(1, 2), workers=(1, 2))
    rates = {(1, 1): 233.0, (2, 1): 252.0, (1, 2): 450.0}

    def holds_the_gil(settings, concurrency):
        throughput = rates[(settings.instances, settings.workers)]
        return throughput, concurrency / throughput * 1e3

    levels = [4]
    search = QuickSearch(space, Settings(max_batch_size=1), Goal(), levels)
    trials = run(search, levels, holds_the_gil)
    assert [(t.settings.instances, t.settings.workers) for t in trials] == [(1, 1), (2, 1), (1, 2)]
    recommended = choose(trials, Goal(), levels).recommended.trial.settings
    assert (recommended.instances, recommended.workers) == (1, 2) and search.converged
