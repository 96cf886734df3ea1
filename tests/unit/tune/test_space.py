"""The space: every point valid, neighbours one step away, the grid nearest the given settings first."""

from pytriton_like.tune.settings import Settings
from pytriton_like.tune.space import Space, default_space


def _space(**fields):
    values = dict(max_batch_sizes=(1, 4, 16), queue_delays_us=(0, 1000), instances=(1, 2), workers=(1, 2))
    return Space(**{**values, **fields})


def test_every_point_of_the_grid_is_valid_and_counted_once():
    space = _space()
    points = list(space.grid())
    assert len(points) == len(set(points)) == space.size()
    assert all(space.contains(point) for point in points)
    # a batch of 1 never waits, instances and workers never together, preferred sizes only with a delay
    assert not any(p.max_batch_size == 1 and p.max_queue_delay_microseconds for p in points)
    assert not any(p.instances > 1 and p.workers > 1 for p in points)
    assert not any(p.preferred_batch_sizes and not p.max_queue_delay_microseconds for p in points)
    assert Settings(16, 1000, (4,)) in points and Settings(16, 1000, (8,)) not in points


def test_neighbours_are_one_step_along_one_dimension():
    space = _space()
    moves = dict(space.neighbours(Settings(max_batch_size=4)))
    assert moves == {
        "max_batch_size+": Settings(16), "max_batch_size-": Settings(1), "workers+": Settings(4, workers=2),
        "instances+": Settings(4, instances=2), "delay+": Settings(4, 1000),
    }
    # from a batch of 1 a larger batch takes the smallest delay the space has
    only_delays = _space(queue_delays_us=(2000, 5000))
    assert dict(only_delays.neighbours(Settings(1)))["max_batch_size+"] == Settings(4, 2000)


def test_a_batch_that_takes_long_suggests_a_delay_longer_than_it():
    space = _space(queue_delays_us=(0, 100, 1000, 50000, 100000))
    moves = dict(space.neighbours(Settings(max_batch_size=16), batch_ms=43.0))
    assert moves["delay~"] == Settings(16, 50000)
    assert moves["delay+"] == Settings(16, 100)
    assert "delay~" not in dict(space.neighbours(Settings(max_batch_size=16), batch_ms=400.0))


def test_the_default_space_keeps_the_given_values_and_workers_stop_at_the_cores():
    given = Settings(max_batch_size=48, max_queue_delay_microseconds=300, workers=3)
    space = default_space(given, cores=2)
    assert 48 in space.max_batch_sizes and 300 in space.queue_delays_us and space.workers == (1, 2, 3)
    assert default_space(Settings(max_batch_size=4), cores=8).workers == tuple(range(1, 9))
    unbatched = default_space(Settings(max_batch_size=0), cores=2)
    assert unbatched.max_batch_sizes == (0,) and unbatched.queue_delays_us == (0,)


def test_the_grid_by_distance_starts_around_the_given_settings():
    space = _space()
    order = space.by_distance(Settings(4))
    assert order[0] == Settings(4)
    assert {space.distance(Settings(4), point) for point in order[1:6]} == {1}
