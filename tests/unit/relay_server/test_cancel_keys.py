"""The relay server's bookkeeping of cancel keys: which batch carries which key, when a batch is
wholly cancelled, and the keys cancelled before their batch came (remembered a while, at most so many)."""

from pytriton_like.relay_server.cancel_keys import CancelKeys


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_batch_ends_when_its_only_request_is_cancelled():
    keys = CancelKeys()
    assert keys.add("b1", ["k1"]) is False
    assert keys.cancel("k1") == "b1"
    assert keys.cancel("k1") is None  # once: afterwards an unknown key, remembered
    assert keys.remembered() == 1


def test_a_batch_ends_only_once_every_request_is_cancelled():
    keys = CancelKeys()
    keys.add("batch", ["a", "b", "c"])
    assert keys.cancel("b") is None and keys.cancel("a") is None
    assert keys.cancel("c") == "batch"
    assert keys.remembered() == 0


def test_a_request_without_a_key_keeps_its_batch_running():
    keys = CancelKeys()
    keys.add("b", ["a", None])
    assert keys.cancel("a") is None
    assert keys.add("plain", [None]) is False  # nothing to register
    assert keys.cancel("x") is None


def test_a_key_cancelled_before_its_batch_ends_that_batch_at_once():
    keys = CancelKeys()
    assert keys.cancel("early") is None
    assert keys.add("b", ["early"]) is True  # end it without calling the callable
    assert keys.remembered() == 0  # used up
    assert keys.add("b2", ["early"]) is False  # and not again


def test_a_batch_partly_cancelled_before_it_came_waits_for_the_rest():
    keys = CancelKeys()
    keys.cancel("a")
    assert keys.add("batch", ["a", "b"]) is False
    assert keys.cancel("b") == "batch"


def test_a_batch_that_ended_forgets_its_keys():
    keys = CancelKeys()
    keys.add("b", ["k"])
    keys.remove("b")
    assert keys.cancel("k") is None  # an unknown key now
    keys.remove("never added")


def test_early_keys_are_remembered_a_while_and_at_most_so_many():
    clock = Clock()
    keys = CancelKeys(remember_s=10, max_remembered=3, clock=clock)
    for key in "abcd":
        keys.cancel(key)
        clock.now += 1
    assert keys.remembered() == 3  # "a", the oldest, went
    assert keys.add("b1", ["a"]) is False
    clock.now = 11.5  # "b" (cancelled at 1) expired, "c" (2) and "d" (3) not yet
    assert keys.remembered() == 2
    assert keys.add("b2", ["b"]) is False and keys.add("b3", ["c"]) is True
    clock.now = 100
    assert keys.remembered() == 0
