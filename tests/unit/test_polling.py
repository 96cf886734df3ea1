"""The one wait for what tritonserver tells only when asked: a back-off doubling from 10 ms to 0.5 s."""

import asyncio

from pytriton_like.polling import Backoff, poll, poll_async


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_delays_double_up_to_half_a_second_and_never_pass_the_deadline():
    clock = Clock()
    backoff = Backoff(2.0, clock)
    delays = []
    while not backoff.expired():
        delay = backoff.next_delay()
        delays.append(round(delay, 3))
        clock.now += delay
    assert delays[:7] == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.5]
    assert round(sum(delays), 6) == 2.0 and backoff.remaining() == 0.0


def test_poll_asks_until_yes_or_the_time_is_up():
    answers = iter([False, False, True])
    slept = []
    assert poll(lambda: next(answers), 10, sleep=slept.append)
    assert slept == [0.01, 0.02]
    assert not poll(lambda: False, 0.05)


def test_poll_async_asks_until_yes_or_the_time_is_up():
    answers = iter([False, False, True])

    async def answer():
        return next(answers)

    async def never():
        return False

    assert asyncio.run(poll_async(answer, 10))
    assert not asyncio.run(poll_async(never, 0.05))
